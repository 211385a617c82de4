package sandbox

import (
	"io"
	"log"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogTo sends every log of a sandbox process to w: controller-runtime's
// (the Cluster API controllers, the webhook servers), klog's (client-go and
// the controllers' helpers) and the standard logger's (the in-memory
// workload clusters' API servers).
func LogTo(w io.Writer) {
	logger := zap.New(zap.WriteTo(w), zap.ConsoleEncoder())
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("klog"))
	log.SetOutput(w)
}
