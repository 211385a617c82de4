package webhooks

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// StampKeySecretName is the name of the Secret, in the guard's namespace,
// that holds the key it signs revision stamps with
// (revisions.AnnotationSignature).
const StampKeySecretName = "rollout-guard-stamp-key"

// StampKeyField is the key of the Secret's data that holds the key.
const StampKeyField = "key"

// LoadStampKey returns the key the guard signs revision stamps with, from
// the Secret name in namespace: given a new random key when it holds none
// (the install ships it empty), created with one when it does not exist
// and the guard may create it (the shipped role does not grant that). Every replica reads the same key; the first to write one wins,
// the others read it (a write with the resourceVersion read as
// precondition, or a create, fails for them and they read again).
//
// Why a Secret the guard fills itself: no operator has to make a key by
// hand, and the guard needs no rights on any other Secret (its Role names
// this one, get and update: config/rbac/stamp_key_role.yaml). c must read
// the API server directly: a cached client would list and watch every
// Secret.
func LoadStampKey(ctx context.Context, c client.Client, namespace, name string) (revisions.StampKey, error) {
	var key revisions.StampKey
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		secret := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			fresh, err := newStampKey()
			if err != nil {
				return err
			}
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "rollout-guard"}},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{StampKeyField: fresh},
			}
			if err := c.Create(ctx, secret); err != nil {
				return err
			}
			key = fresh
			return nil
		case err != nil:
			return err
		}
		if have := secret.Data[StampKeyField]; len(have) >= revisions.MinStampKeyLen {
			key = have
			return nil
		}
		fresh, err := newStampKey()
		if err != nil {
			return err
		}
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[StampKeyField] = fresh
		if err := c.Update(ctx, secret); err != nil {
			return err
		}
		key = fresh
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the key rollout-guard signs revision stamps with (Secret %s/%s, field %s: apply config/rbac, which ships it and the Role that lets the guard get and update it): %w",
			namespace, name, StampKeyField, err)
	}
	return key, nil
}

// newStampKey draws a new random key.
func newStampKey() (revisions.StampKey, error) {
	key := make([]byte, revisions.MinStampKeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("drawing a stamp key: %w", err)
	}
	return key, nil
}
