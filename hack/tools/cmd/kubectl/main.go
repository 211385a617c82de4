// Command kubectl is the upstream kubectl, used as a real black-box client in
// end-to-end tests and in the sandbox tour.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		// Print the error the way kubectl does and exit non-zero.
		util.CheckErr(err)
	}
}
