package canary

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestBroker: the right bearer token is served and the hit attributed; no
// token or a wrong one is refused with a hit that carries no attribution;
// an open broker serves anyone.
func TestBroker(t *testing.T) {
	rec := NewRecorder(0, nil)
	call := func(b *Broker, path, auth, attribution string) int {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		req.Header.Set(TokenHeader, attribution)
		w := httptest.NewRecorder()
		b.ServeHTTP(w, req)
		body, _ := io.ReadAll(w.Result().Body)
		if w.Code == 200 && string(body) != BrokerReply+"\n" {
			t.Errorf("body %q", body)
		}
		return w.Code
	}
	strict := NewBroker(rec, "scbsecret", false)
	if c := call(strict, BrokerPath, "scbsecret", "tokb1/egress.tool-broker"); c != 200 {
		t.Errorf("with the token: %d", c)
	}
	if hits := rec.ByToken("tokb1"); len(hits) != 1 || hits[0].Status != 200 || hits[0].Service != ServiceBroker {
		t.Errorf("hits %+v", rec.Hits())
	}
	for i, auth := range []string{"", "wrong", "scbsecre"} {
		tok := "tokbad" + string(rune('a'+i))
		if c := call(strict, BrokerPath, auth, tok+"/egress.broker-no-token"); c != 401 {
			t.Errorf("auth %q: %d, want 401", auth, c)
		}
		if len(rec.ByToken(tok)) != 0 {
			t.Errorf("auth %q: a refused request was attributed", auth)
		}
	}
	if c := call(strict, "/other", "scbsecret", "tokb2/x"); c != 404 {
		t.Errorf("other path: %d", c)
	}
	if c := call(NewBroker(rec, "scbsecret", true), BrokerPath, "", "tokb3/egress.broker-no-token"); c != 200 || len(rec.ByToken("tokb3")) != 1 {
		t.Errorf("open broker without a token: %d", c)
	}
}
