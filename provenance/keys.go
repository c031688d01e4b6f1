package provenance

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PasswordEnv names the environment variable holding the private key's
// password, as the cosign CLI uses it.
const PasswordEnv = "COSIGN_PASSWORD"

// maxKeyFile bounds a key file.
const maxKeyFile = 64 << 10

// Key file names GenerateKeys writes, as cosign names them.
const (
	PrivateKeyFile = "cosign.key"
	PublicKeyFile  = "cosign.pub"
)

// GenerateKeys writes a new cosign key pair (ECDSA P-256, the private key
// encrypted with password) to dir as cosign.key and cosign.pub and returns
// their paths.
func GenerateKeys(dir string, password []byte) (priv, pub string, err error) {
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return "", "", fmt.Errorf("generating key pair: %w", err)
	}
	priv, pub = filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile)
	if err := os.WriteFile(priv, kb.PrivateBytes, 0o600); err != nil {
		return "", "", fmt.Errorf("writing private key: %w", err)
	}
	if err := os.WriteFile(pub, kb.PublicBytes, 0o644); err != nil {
		return "", "", fmt.Errorf("writing public key: %w", err)
	}
	return priv, pub, nil
}

// Signer signs with a cosign private key.
type Signer struct {
	signature.SignerVerifier
	// Fingerprint is the sha256 of the public key's DER encoding.
	Fingerprint string
}

// Verifier verifies with a cosign public key.
type Verifier struct {
	signature.Verifier
	// Fingerprint is the sha256 of the public key's DER encoding.
	Fingerprint string
}

// LoadSigner reads a cosign private key file encrypted with password. A
// missing or unreadable file, or a wrong password, is a harness error.
func LoadSigner(path string, password []byte) (*Signer, error) {
	b, err := readKey(path)
	if err != nil {
		return nil, err
	}
	sv, err := cosign.LoadPrivateKey(b, password, nil)
	if err != nil {
		return nil, fmt.Errorf("loading private key %s: %w", path, err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("loading private key %s: %w", path, err)
	}
	fp, err := Fingerprint(pub)
	if err != nil {
		return nil, fmt.Errorf("loading private key %s: %w", path, err)
	}
	return &Signer{SignerVerifier: sv, Fingerprint: fp}, nil
}

// LoadVerifier reads a PEM public key file (as cosign writes it).
func LoadVerifier(path string) (*Verifier, error) {
	b, err := readKey(path)
	if err != nil {
		return nil, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("loading public key %s: %w", path, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading public key %s: %w", path, err)
	}
	fp, err := Fingerprint(pub)
	if err != nil {
		return nil, fmt.Errorf("loading public key %s: %w", path, err)
	}
	return &Verifier{Verifier: v, Fingerprint: fp}, nil
}

// Fingerprint is "sha256:" and the hex sha256 of the key's DER encoding.
func Fingerprint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encoding public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func readKey(path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("reading key: no key file given")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading key: %w", err)
	}
	defer f.Close()
	b := make([]byte, maxKeyFile+1)
	n, err := readFull(f, b)
	if err != nil {
		return nil, fmt.Errorf("reading key %s: %w", path, err)
	}
	if n > maxKeyFile {
		return nil, fmt.Errorf("reading key %s: larger than %d bytes", path, maxKeyFile)
	}
	return b[:n], nil
}
