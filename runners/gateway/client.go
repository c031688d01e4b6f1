package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxResponse bounds every response body read from the gateway (a task's
// output is in it).
const maxResponse = 8 << 20

// client calls the gateway's API with one key.
type client struct {
	base    string
	http    *http.Client
	timeout time.Duration
}

// apiError is a call that answered with an unexpected status.
type apiError struct {
	call   string
	status int
	body   string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: status %d: %s", e.call, e.status, e.body)
}

// call sends one request with key as its Bearer token and decodes a JSON
// answer into out (nil: the body is read and dropped). Errors name the call
// (method and path), never the key.
func (c *client) call(ctx context.Context, method, path, key string, in, out any, timeout time.Duration) (int, error) {
	name := method + " " + strings.SplitN(path, "?", 2)[0]
	if timeout <= 0 {
		timeout = c.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("%s: encoding the request: %w", name, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%s: no answer within %s: %w", name, timeout, ctx.Err())
		}
		return 0, fmt.Errorf("%s: %w", name, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: reading the answer: %w", name, err)
	}
	if len(b) > maxResponse {
		return resp.StatusCode, fmt.Errorf("%s: answer larger than %d bytes", name, maxResponse)
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, &apiError{call: name, status: resp.StatusCode, body: excerpt(b)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: malformed JSON answer: %w (body %s)", name, err, excerpt(b))
		}
	}
	return resp.StatusCode, nil
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return fmt.Sprintf("%q", s)
}
