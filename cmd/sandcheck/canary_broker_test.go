package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandcheck/sandcheck/canary"
)

// TestCanaryServeBrokerCycle starts the tool broker alone through canary
// serve on loopback and drives the reference broker a platform would test
// against through a full cycle: mint (with the printed broker token as the
// admin key) -> use -> revoke -> refuse.
func TestCanaryServeBrokerCycle(t *testing.T) {
	addr := freePort(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := canaryCmd()
	var out syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--hits", filepath.Join(t.TempDir(), "hits"), "--duration", "20s", "--broker", addr})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	tokRe := regexp.MustCompile(`broker_token: (scb[0-9a-f]+)`)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), canaryPrintKey("broker")+": ") && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("canary serve ended early: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	m := tokRe.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no broker token printed:\n%s", out.String())
	}
	base := "http://" + addr
	cl := &http.Client{Timeout: 5 * time.Second}
	req, _ := http.NewRequest(http.MethodPost, base+canary.BrokerMintPath,
		strings.NewReader(`{"run":"r1","task":"t1","tenant":"tenant-a","resource":"tickets","operation":"read","ttl":10000000000}`))
	req.Header.Set("Authorization", "Bearer "+m[1])
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var minted struct {
		Token string `json:"token"`
	}
	json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&minted)
	resp.Body.Close()
	if resp.StatusCode != 200 || minted.Token == "" {
		t.Fatalf("mint: %d", resp.StatusCode)
	}
	use := func() int {
		req, _ := http.NewRequest(http.MethodGet, base+canary.BrokerObjectsPath+"tenant-a/tickets", nil)
		req.Header.Set("Authorization", "Bearer "+minted.Token)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := use(); c != 200 {
		t.Fatalf("use of a fresh token: %d", c)
	}
	resp, err = cl.PostForm(base+canary.BrokerRevokePath, url.Values{"token": {minted.Token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if c := use(); c != 401 {
		t.Errorf("use after revocation: %d, want 401", c)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("canary serve: %v", err)
	}
}
