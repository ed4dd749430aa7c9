//go:build cgo

package pkcs11key

import (
	"errors"
	"fmt"

	"github.com/ThalesGroup/crypto11"
)

// Open logs in to the token the URI names and finds its key pair; pin
// is the PIN when the URI gives none.
func Open(uri, pin string) (Key, error) {
	t, err := parse(uri, pin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", describe(uri), err)
	}
	ctx, err := crypto11.Configure(&crypto11.Config{
		Path: t.module, TokenLabel: t.tokenLabel, TokenSerial: t.tokenSerial, SlotNumber: t.slot, Pin: t.pin,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: opening the token: %w", describe(uri), err)
	}
	signer, err := ctx.FindKeyPair(t.id, t.label)
	if err == nil && signer == nil {
		err = errors.New("nothing matches")
	}
	if err != nil {
		ctx.Close()
		return nil, fmt.Errorf("%s: no such key pair on the token (a private key and its public key, found by object= and id=): %w", describe(uri), err)
	}
	return &key{Signer: signer, ctx: ctx}, nil
}

type key struct {
	crypto11.Signer
	ctx *crypto11.Context
}

func (k *key) Close() error { return k.ctx.Close() }
