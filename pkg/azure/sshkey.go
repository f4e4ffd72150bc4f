package azure

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
)

// sshKeyTypes are the public key types Azure accepts for Linux VMs.
var sshKeyTypes = []string{"ssh-rsa", "ssh-ed25519"}

// ValidateSSHPublicKey checks that key is one OpenSSH authorized_keys line
// of a type Azure accepts (ssh-rsa, ssh-ed25519), so a bad setting fails at
// the first invocation rather than in every VM create.
func ValidateSSHPublicKey(key string) error {
	fields := strings.Fields(key)
	if len(fields) < 2 {
		return fmt.Errorf("%q is not an OpenSSH public key (want \"ssh-rsa AAAA…\" or \"ssh-ed25519 AAAA…\", the contents of id_rsa.pub)", abbreviate(key))
	}
	typ := fields[0]
	known := false
	for _, accepted := range sshKeyTypes {
		known = known || typ == accepted
	}
	if !known {
		return fmt.Errorf("key type %q is not accepted by Azure for Linux VMs; use %s", typ, strings.Join(sshKeyTypes, " or "))
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil || len(blob) < 4 {
		return fmt.Errorf("the %s key data is not base64", typ)
	}
	nameLen := binary.BigEndian.Uint32(blob)
	if uint64(nameLen)+4 > uint64(len(blob)) || string(blob[4:4+nameLen]) != typ {
		return fmt.Errorf("the key data does not hold a %s key", typ)
	}
	return nil
}

// GenerateSSHPublicKey returns a fresh ed25519 public key in authorized_keys
// form whose private half is discarded: a key nobody can log in with, for
// local environments that need one.
func GenerateSSHPublicKey(comment string) (string, error) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	var blob []byte
	for _, part := range [][]byte{[]byte("ssh-ed25519"), pub} {
		blob = binary.BigEndian.AppendUint32(blob, uint32(len(part)))
		blob = append(blob, part...)
	}
	return strings.TrimSpace("ssh-ed25519 " + base64.StdEncoding.EncodeToString(blob) + " " + comment), nil
}

func abbreviate(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}
