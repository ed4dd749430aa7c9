package keyring

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// The rules Verify refuses a good signature by: the key that made it was not
// valid when it was made. The errors Verify returns wrap one of these, with
// the key, the dates and the reason; test them with errors.Is.
var (
	// ErrKeyRevoked: the primary key or the signing subkey is revoked.
	ErrKeyRevoked = errors.New("key revoked")
	// ErrKeyExpired: the key, or the self-signature or binding signature
	// that makes it valid, had expired when the signature was made.
	ErrKeyExpired = errors.New("key expired")
	// ErrKeyNotYetValid: the signature was made before the key was created.
	ErrKeyNotYetValid = errors.New("signature made before the key was created")
	// ErrKeyNotForSigning: the key may not sign data (its key flags lack
	// the signing flag, or a signing subkey is not cross-certified).
	ErrKeyNotForSigning = errors.New("key not usable for signing")
)

// keyError is one refusal: the rule it breaks and what exactly happened.
type keyError struct {
	rule error
	msg  string
}

func (e *keyError) Error() string { return e.msg }
func (e *keyError) Unwrap() error { return e.rule }

func refuse(rule error, format string, a ...any) error {
	return &keyError{rule: rule, msg: fmt.Sprintf(format, a...)}
}

// validAt checks that key (a primary key or a subkey, as KeysById returns
// them) could make a data signature at time t. go-crypto checked, when the
// key was read, every self-signature, subkey binding, cross-signature of a
// subkey flagged for signing, and revocation it keeps; what is left is
// revocation, creation and expiry at t, and key usage. go-crypto's own
// checks (Entity.SigningKeyById, CheckDetachedSignature) judge at one
// "now" and want key flags, which the CentOS 2-4 keys do not carry.
func (k *Keyring) validAt(key openpgp.Key, t time.Time) error {
	e := key.Entity
	primary := e.PrimaryKey
	bySubkey := key.PublicKey != primary
	pname := "key " + fingerprint(primary)
	name := pname
	if bySubkey {
		name = "subkey " + fingerprint(key.PublicKey) + " of " + pname
	}

	// Revocation always wins, whatever its date and reason.
	if rev := k.revocation(primary, nil); rev != nil {
		if bySubkey {
			return refuse(ErrKeyRevoked, "primary key %s of subkey %s was revoked %s", fingerprint(primary), fingerprint(key.PublicKey), describeRevocation(rev))
		}
		return refuse(ErrKeyRevoked, "%s was revoked %s", pname, describeRevocation(rev))
	}
	if bySubkey {
		if rev := k.revocation(primary, key.PublicKey); rev != nil {
			return refuse(ErrKeyRevoked, "%s was revoked %s", name, describeRevocation(rev))
		}
	}

	// Creation: the key (and its primary key) must exist when it signs.
	if t.Before(primary.CreationTime) {
		return refuse(ErrKeyNotYetValid, "made on %s, before %s was created on %s", when(t), pname, when(primary.CreationTime))
	}
	if bySubkey && t.Before(key.PublicKey.CreationTime) {
		return refuse(ErrKeyNotYetValid, "made on %s, before %s was created on %s", when(t), name, when(key.PublicKey.CreationTime))
	}

	// Expiry of the primary key, from the self-signature of its primary
	// user ID (v4) or its direct-key signature (v6), the newest one.
	self, _ := e.PrimarySelfSignature()
	if self == nil {
		return refuse(ErrKeyNotForSigning, "%s has no valid self-signature", pname)
	}
	if primary.KeyExpired(self, t) {
		return expired(pname, keyExpiry(primary, self), t)
	}
	if exp, ok := sigExpiry(self); ok && t.After(exp) {
		return expired("the self-signature of "+pname, exp, t)
	}
	if !bySubkey {
		if self.FlagsValid && !self.FlagSign {
			return refuse(ErrKeyNotForSigning, "%s may not sign data: its key flags lack the signing flag", pname)
		}
		return nil
	}

	// A subkey: its newest binding signature by the primary key.
	bind := key.SelfSignature
	if bind == nil {
		return refuse(ErrKeyNotForSigning, "%s has no binding signature", name)
	}
	if key.PublicKey.KeyExpired(bind, t) {
		return expired(name, keyExpiry(key.PublicKey, bind), t)
	}
	if exp, ok := sigExpiry(bind); ok && t.After(exp) {
		return expired("the binding signature of "+name, exp, t)
	}
	switch {
	case bind.FlagsValid && !bind.FlagSign:
		return refuse(ErrKeyNotForSigning, "%s may not sign data: its key flags lack the signing flag", name)
	case bind.FlagsValid:
		// go-crypto verified the cross-signature when it read the key.
	case !key.PublicKey.PubKeyAlgo.CanSign():
		return refuse(ErrKeyNotForSigning, "%s has an algorithm (%s) that cannot sign", name, algoName(key.PublicKey.PubKeyAlgo))
	case !crossCertified(primary, key.PublicKey, bind):
		// No key flags: usage follows the algorithm, and a subkey that
		// signs must be cross-certified, as gpg requires.
		return refuse(ErrKeyNotForSigning, "%s is not cross-certified (no valid primary key binding signature made by the subkey)", name)
	}
	if emb := bind.EmbeddedSignature; emb != nil {
		if exp, ok := sigExpiry(emb); ok && t.After(exp) {
			return expired("the cross-signature of "+name, exp, t)
		}
	}
	return nil
}

// revocation returns a revocation of the primary key (sub nil) or of its
// subkey sub from any copy of the key in the keyring, so an older copy
// without the revocation cannot hide it. go-crypto verified each one when
// it read the key.
func (k *Keyring) revocation(primary, sub *packet.PublicKey) *packet.Signature {
	for _, e := range k.entities {
		if !bytes.Equal(e.PrimaryKey.Fingerprint, primary.Fingerprint) {
			continue
		}
		if sub == nil {
			if len(e.Revocations) > 0 {
				return e.Revocations[0]
			}
			continue
		}
		for _, sk := range e.Subkeys {
			if bytes.Equal(sk.PublicKey.Fingerprint, sub.Fingerprint) && len(sk.Revocations) > 0 {
				return sk.Revocations[0]
			}
		}
	}
	return nil
}

// crossCertified checks the primary key binding signature (0x19) that a
// subkey embeds in its binding signature, which go-crypto verifies only
// when the binding's key flags say "sign".
func crossCertified(primary, sub *packet.PublicKey, bind *packet.Signature) bool {
	emb := bind.EmbeddedSignature
	if emb == nil || emb.SigType != packet.SigTypePrimaryKeyBinding {
		return false
	}
	h, err := emb.PrepareVerify()
	if err != nil {
		return false
	}
	// RFC 4880 5.2.4: the primary key, then the subkey.
	if primary.SerializeForHash(h) != nil || sub.SerializeForHash(h) != nil {
		return false
	}
	return sub.VerifySignature(h, emb) == nil
}

func expired(name string, at, t time.Time) error {
	return refuse(ErrKeyExpired, "%s had expired on %s before the signature was made on %s", name, when(at), when(t))
}

// keyExpiry is when pk expires according to sig (which has a lifetime).
func keyExpiry(pk *packet.PublicKey, sig *packet.Signature) time.Time {
	return pk.CreationTime.Add(time.Duration(*sig.KeyLifetimeSecs) * time.Second)
}

// sigExpiry is when a self-signature itself expires, if it does.
func sigExpiry(sig *packet.Signature) (time.Time, bool) {
	if sig.SigLifetimeSecs == nil || *sig.SigLifetimeSecs == 0 {
		return time.Time{}, false
	}
	return sig.CreationTime.Add(time.Duration(*sig.SigLifetimeSecs) * time.Second), true
}

func describeRevocation(rev *packet.Signature) string {
	s := "on " + when(rev.CreationTime)
	var why []string
	if rev.RevocationReason != nil {
		why = append(why, reasonName(*rev.RevocationReason))
	}
	if rev.RevocationReasonText != "" {
		why = append(why, fmt.Sprintf("%q", rev.RevocationReasonText))
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ": ") + ")"
	}
	return s
}

func reasonName(r packet.ReasonForRevocation) string {
	switch r {
	case packet.NoReason:
		return "no reason specified"
	case packet.KeySuperseded:
		return "key superseded"
	case packet.KeyCompromised:
		return "key compromised"
	case packet.KeyRetired:
		return "key retired"
	}
	return fmt.Sprintf("reason %d", r)
}

func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// fingerprint is the upper-case hex fingerprint of a key.
func fingerprint(pk *packet.PublicKey) string {
	return strings.ToUpper(hex.EncodeToString(pk.Fingerprint))
}
