package canary

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
)

// AWSCredentials are the honeytoken role credentials the AWS canary hands
// out. They are unique per Metadata and valid nowhere: seeing any of them
// anywhere else (a probe's output, a DNS query, a sink) proves they left the
// host's canary.
type AWSCredentials struct {
	RoleName        string
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	AccountID       string
}

// Honey holds every honeytoken one Metadata hands out.
type Honey struct {
	AWS AWSCredentials
	// InstanceID is the AWS instance ID the canary claims.
	InstanceID string
	// GCPAccessToken is the OAuth token of the fake GCP default account.
	GCPAccessToken string
	// GCPIdentityToken is the OIDC identity token of the fake GCP account.
	GCPIdentityToken string
	// GCPProject is the fake GCP project ID.
	GCPProject string
	// AzureAccessToken is the managed-identity token of the fake Azure VM.
	AzureAccessToken string
	// AzureClientID is the fake managed identity's client ID.
	AzureClientID string
	// AzureSubscription is the fake VM's subscription ID.
	AzureSubscription string
	// ECSRoleName is the ECS task role; its credentials are the AWS ones.
	ECSRoleName string
	// AlibabaRoleName is the RAM role the Alibaba canary names.
	AlibabaRoleName string
	// AlibabaAccessKeyID, AlibabaAccessKeySecret and AlibabaSecurityToken
	// are the RAM role's STS credentials.
	AlibabaAccessKeyID     string
	AlibabaAccessKeySecret string
	AlibabaSecurityToken   string
}

// Secrets lists the values that must never appear outside the canary.
func (h Honey) Secrets() []string {
	return []string{h.AWS.AccessKeyID, h.AWS.SecretAccessKey, h.AWS.SessionToken, h.GCPAccessToken, h.GCPIdentityToken, h.AzureAccessToken,
		h.AlibabaAccessKeyID, h.AlibabaAccessKeySecret, h.AlibabaSecurityToken}
}

const (
	base32Upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	base64Chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	digits      = "0123456789"
)

// newHoney draws a fresh set of honeytokens shaped like the real thing, so
// SDKs and secret scanners accept them.
func newHoney(roleName string) Honey {
	return Honey{
		AWS: AWSCredentials{
			RoleName:        roleName,
			AccessKeyID:     "ASIA" + randString(base32Upper, 16),
			SecretAccessKey: randString(base64Chars, 40),
			SessionToken:    "IQoJb3JpZ2luX2Vj" + randString(base64Chars, 344),
			AccountID:       randString("123456789", 1) + randString(digits, 11),
		},
		InstanceID:        "i-" + randHex(17),
		GCPAccessToken:    "ya29.c." + base64.RawURLEncoding.EncodeToString(randBytes(96)),
		GCPIdentityToken:  fakeJWT("https://accounts.google.com"),
		GCPProject:        "sandcheck-honey-" + randHex(6),
		AzureAccessToken:  fakeJWT("https://sts.windows.net/" + uuid() + "/"),
		AzureClientID:     uuid(),
		AzureSubscription: uuid(),
		ECSRoleName:       "sandcheck-task-role",
		AlibabaRoleName:   "sandcheck-ram-role",
		// Shaped like RAM STS credentials: an "STS." key ID, an
		// alphanumeric secret and a "CAIS" security token.
		AlibabaAccessKeyID:     "STS." + randString(base32Upper+"abcdefghijkmnopqrstuvwxyz", 24),
		AlibabaAccessKeySecret: randString(base64Chars[:62], 44),
		AlibabaSecurityToken:   "CAIS" + randString(base64Chars, 300),
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics on failure instead)
	return b
}

func randHex(n int) string {
	return hex.EncodeToString(randBytes((n + 1) / 2))[:n]
}

func randString(alphabet string, n int) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(fmt.Sprintf("reading random numbers: %v", err))
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}

func uuid() string {
	b := randBytes(16)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// fakeJWT returns a JWT-shaped token from issuer with an unverifiable
// signature.
func fakeJWT(issuer string) string {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"RS256","kid":"sandcheck-honey"}`))
	claims := enc.EncodeToString([]byte(`{"iss":"` + issuer + `","sub":"` + uuid() + `"}`))
	return header + "." + claims + "." + enc.EncodeToString(randBytes(256))
}
