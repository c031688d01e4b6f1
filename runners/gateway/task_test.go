package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
	"github.com/sandcheck/sandcheck/targets"
)

// TestTaskResponseMapping checks the reading of a task answer through the
// target's mapping alone: the fields it names, never a guess.
func TestTaskResponseMapping(t *testing.T) {
	var body string
	var got struct{ auth, req string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.auth, got.req = r.Header.Get("Authorization"), string(b)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	cfg := targets.Gateway{URL: srv.URL, RuntimeProfile: "session",
		TaskResponse: &targets.TaskResponse{ExitCode: "rc", Stdout: "out", Stderr: "err"}}
	s := &Sandbox{r: New(cfg, "admin-key", nil), id: "abc", env: map[string]string{"A": "it's"}}
	cases := []struct {
		body, wantErr string
		code          int
		out           string
	}{
		{`{"rc": 3, "out": "hi", "err": "e"}`, "", 3, "hi"},
		{`{"exit_code": 0, "stdout": "hi"}`, `field "rc" (task_response.exit_code) is not a number`, -1, ""},
		{`{"rc": "0", "out": "hi"}`, `field "rc" (task_response.exit_code) is not a number`, -1, ""},
		{`{"rc": 0}`, `field "out" of task_response is not a string`, 0, ""},
		{`{"rc": 0, "out": "x"`, "malformed JSON answer", -1, ""},
		{`{"rc": 0, "out": "` + strings.Repeat("x", runners.MaxOutput+5) + `"}`, "", 0, strings.Repeat("x", runners.MaxOutput)},
	}
	for _, c := range cases {
		body = c.body
		res, err := s.Exec(context.Background(), []string{"/bin/echo", "a b"})
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("body %.40s: error %v, want %q", c.body, err, c.wantErr)
			}
			continue
		}
		if err != nil || res.ExitCode != c.code || string(res.Stdout) != c.out {
			t.Errorf("body %.40s: exit %d stdout %.20q err %v", c.body, res.ExitCode, res.Stdout, err)
		}
		if (len(c.out) == runners.MaxOutput) != res.Truncated {
			t.Errorf("body %.40s: truncated %v", c.body, res.Truncated)
		}
	}
	if got.auth != "Bearer admin-key" || !strings.Contains(got.req, `export A='it'\\''s'; exec '/bin/echo' 'a b'`) {
		t.Errorf("request: auth %q body %s", got.auth, got.req)
	}
}
