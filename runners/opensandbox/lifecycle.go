package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxBody bounds a lifecycle response body read into memory.
const maxBody = 4 << 20

// apiKeyHeader carries the lifecycle API key.
const apiKeyHeader = "OPEN-SANDBOX-API-KEY"

// errNotFound is a 404 from the lifecycle API.
var errNotFound = errors.New("not found")

// client speaks the lifecycle API (sandbox-lifecycle.yml).
type client struct {
	base    string // no trailing slash
	key     string // never logged or returned in an error
	http    *http.Client
	timeout time.Duration
}

// apiError is the lifecycle API's error body.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// status is a sandbox's lifecycle status.
type status struct {
	State   string `json:"state"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// sandboxInfo is what the runner reads of a sandbox.
type sandboxInfo struct {
	ID     string `json:"id"`
	Status status `json:"status"`
}

// endpoint is GET /sandboxes/{id}/endpoints/{port}.
type endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers"`
}

// call sends one lifecycle request and decodes a JSON answer into out (nil:
// none expected). An answer other than want is an error naming the call,
// the status, the API's code and message and the request id.
func (c *client) call(ctx context.Context, method, path string, body, out any, want int) error {
	return c.callURL(ctx, method, c.base+path, method+" "+path, body, out, want)
}

// callURL is call for a full address; name names the call in errors.
func (c *client) callURL(ctx context.Context, method, addr, name string, body, out any, want int) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("opensandbox %s: encoding the request: %w", name, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, addr, rd)
	if err != nil {
		return fmt.Errorf("opensandbox %s: %w", name, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set(apiKeyHeader, c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ne net.Error
		if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return fmt.Errorf("opensandbox %s: no answer within %s: %w", name, c.timeout, err)
		}
		return fmt.Errorf("opensandbox %s: %w", name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("opensandbox %s: reading the answer: %w", name, err)
	}
	if len(raw) > maxBody {
		return fmt.Errorf("opensandbox %s: answer over %d bytes", name, maxBody)
	}
	rid := resp.Header.Get("X-Request-ID")
	if resp.StatusCode != want {
		detail := errorDetail(raw)
		err := fmt.Errorf("opensandbox %s: status %s (request %s): %s", name, resp.Status, rid, detail)
		switch resp.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", err, errNotFound)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%w: the server refused the API key", err)
		}
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("opensandbox %s: malformed JSON answer (request %s): %w: %s", name, rid, err, snippet(raw))
	}
	return nil
}

// errorDetail words an error answer: the API's {"code", "message"}, or
// FastAPI's validation answer (422, {"detail": [{"loc", "msg"}]}), which
// upstream gives for a request its schema refuses; else an excerpt.
func errorDetail(raw []byte) string {
	var ae apiError
	if json.Unmarshal(raw, &ae) == nil && ae.Code != "" {
		return ae.Code + ": " + ae.Message
	}
	var v struct {
		Detail []struct {
			Loc []any  `json:"loc"`
			Msg string `json:"msg"`
		} `json:"detail"`
	}
	if json.Unmarshal(raw, &v) == nil && len(v.Detail) > 0 {
		parts := make([]string, 0, len(v.Detail))
		for _, d := range v.Detail {
			loc := make([]string, 0, len(d.Loc))
			for _, l := range d.Loc {
				loc = append(loc, fmt.Sprint(l))
			}
			parts = append(parts, strings.Join(loc, ".")+": "+d.Msg)
		}
		return snippet([]byte(strings.Join(parts, "; ")))
	}
	return snippet(raw)
}

// snippet is a short printable excerpt of a body for an error.
func snippet(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// createRequest is the body of POST /sandboxes.
type createRequest struct {
	Image          map[string]string `json:"image"`
	Entrypoint     []string          `json:"entrypoint"`
	ResourceLimits map[string]string `json:"resourceLimits"`
	Timeout        *int              `json:"timeout,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	NetworkPolicy  *networkPolicy    `json:"networkPolicy,omitempty"`
}

type networkPolicy struct {
	DefaultAction string       `json:"defaultAction"`
	Egress        []egressRule `json:"egress"`
}

type egressRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

func (c *client) create(ctx context.Context, req createRequest) (sandboxInfo, error) {
	var out sandboxInfo
	if err := c.call(ctx, http.MethodPost, "/sandboxes", req, &out, http.StatusAccepted); err != nil {
		return out, err
	}
	if out.ID == "" {
		return out, errors.New("opensandbox POST /sandboxes: the answer names no sandbox id")
	}
	return out, nil
}

func (c *client) get(ctx context.Context, id string) (sandboxInfo, error) {
	var out sandboxInfo
	err := c.call(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, &out, http.StatusOK)
	return out, err
}

func (c *client) delete(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil, http.StatusNoContent)
}

func (c *client) endpoint(ctx context.Context, id string, port int) (endpoint, error) {
	var out endpoint
	err := c.call(ctx, http.MethodGet, fmt.Sprintf("/sandboxes/%s/endpoints/%d", url.PathEscape(id), port), nil, &out, http.StatusOK)
	if err == nil && out.Endpoint == "" {
		err = fmt.Errorf("opensandbox GET /sandboxes/%s/endpoints/%d: the answer names no endpoint", id, port)
	}
	return out, err
}

// listByMetadata lists the ids of sandboxes whose metadata has k=v (the
// first 100).
func (c *client) listByMetadata(ctx context.Context, k, v string) ([]string, error) {
	var out struct {
		Items []sandboxInfo `json:"items"`
	}
	q := url.Values{"metadata": {k + "=" + v}, "pageSize": {"100"}}
	if err := c.call(ctx, http.MethodGet, "/sandboxes?"+q.Encode(), nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		ids = append(ids, it.ID)
	}
	return ids, nil
}
