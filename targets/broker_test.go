package targets

import (
	"strings"
	"testing"
	"time"
)

const brokerBase = "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: brokered-data-task\ndocker:\n  runtime: runc\n  network: none\n"

// TestBrokerDeclared: the reference broker in either mode, and a
// platform's broker with its token's place, introspection, revoke call and
// bound, are read as declared.
func TestBrokerDeclared(t *testing.T) {
	tg, err := Parse("t.yaml", []byte(brokerBase+"broker: {reference: hardened}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tg.BrokerReference() != "hardened" || tg.Broker.Bound() != DefaultRevocationBound {
		t.Errorf("reference %q bound %s", tg.BrokerReference(), tg.Broker.Bound())
	}
	tg, err = Parse("t.yaml", []byte(brokerBase+"broker:\n  token: {file: /run/secrets/broker-token}\n  introspect: https://broker.test/introspect\n"+
		"  revoke: {url: \"https://broker.test/revoke/${TOKEN_SHA256}\", method: DELETE}\n  revocation_bound: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tg.BrokerReference() != "" || tg.Broker.Token.File != "/run/secrets/broker-token" || tg.Broker.Bound() != 2*time.Second {
		t.Errorf("platform broker %+v", tg.Broker)
	}
	var none Target
	if none.BrokerReference() != "" {
		t.Error("no broker: no reference")
	}
}

// TestBrokerRejects: every malformed declaration is an error naming the
// file, line and field.
func TestBrokerRejects(t *testing.T) {
	for name, tc := range map[string]struct{ add, want string }{
		"unknown mode":     {"broker: {reference: lax}\n", "t.yaml:9:"},
		"empty":            {"broker: {revocation_bound: 5s}\n", "$.broker: needs reference"},
		"reference extras": {"broker: {reference: weak, introspect: \"http://b/i\"}\n", "$.broker.reference: the reference broker"},
		"two token places": {"broker: {token: {env: TOK, file: /t}}\n", "$.broker.token: needs exactly one"},
		"bad env":          {"broker: {token: {env: \"1X\"}}\n", "t.yaml:9:"},
		"relative file":    {"broker: {token: {file: t/x}}\n", "t.yaml:9:"},
		"revoke no token":  {"broker: {token: {env: TOK}, revoke: {url: \"http://b/revoke\"}}\n", "${TOKEN} or ${TOKEN_SHA256}"},
		"revoke both":      {"broker: {token: {env: TOK}, revoke: {url: \"http://b/${TOKEN}\", command: [x]}}\n", "exactly one of url or command"},
		"command no token": {"broker: {token: {env: TOK}, revoke: {command: [revoke, all]}}\n", "$.broker.revoke.command"},
		"bound too long":   {"broker: {reference: hardened, revocation_bound: 2m}\n", "$.broker.revocation_bound"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(brokerBase+tc.add))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
