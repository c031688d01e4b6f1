package impl

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
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sandcheck/sandcheck/probes"
)

// engineAPI speaks the Docker Engine API over a socket found inside the box.
// The teardown probes use it the way hostile code would: to create things
// (containers, volumes, networks) that the platform's teardown of this box
// knows nothing about. Everything created carries the probe's token in its
// name and labels.
type engineAPI struct {
	sock string
	c    *http.Client
}

const (
	engineAPITimeout = 5 * time.Second
	engineAPIMaxBody = 64 << 10
)

// findEngineAPI returns the first Docker-API socket in the box that answers
// /_ping, or nil and what was tried.
func findEngineAPI(ctx context.Context) (*engineAPI, []string) {
	var tried []string
	for _, s := range socketCandidates() {
		if k := engineKind(s); k != "docker" && k != "podman" {
			continue
		}
		a := newEngineAPI(s)
		status, _, err := a.do(ctx, http.MethodGet, "/_ping", nil)
		switch {
		case err != nil:
			tried = append(tried, s+": "+clip(err.Error(), 80))
		case status != http.StatusOK:
			tried = append(tried, fmt.Sprintf("%s: /_ping answered %d", s, status))
		default:
			return a, append(tried, s+": answers")
		}
	}
	return nil, tried
}

func newEngineAPI(sock string) *engineAPI {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}
	return &engineAPI{sock: sock, c: &http.Client{Transport: tr, Timeout: engineAPITimeout}}
}

// do sends one request with a JSON body (when body is not nil) and returns
// the status and at most engineAPIMaxBody bytes of the answer.
func (a *engineAPI) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://engine"+path, r)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.c.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, engineAPIMaxBody))
	if err != nil {
		return res.StatusCode, nil, fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	return res.StatusCode, b, nil
}

// apiError is a non-success answer of the engine.
type apiError struct {
	what   string
	status int
	msg    string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: engine answered %d: %s", e.what, e.status, e.msg)
}

// call does one request and decodes a success answer into out (when not
// nil); any other status is an *apiError.
func (a *engineAPI) call(ctx context.Context, what, method, path string, body, out any) error {
	status, b, err := a.do(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if status < 200 || status > 299 {
		var m struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &m)
		return &apiError{what: what, status: status, msg: clip(m.Message, 160)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: decoding answer: %w", what, err)
		}
	}
	return nil
}

// containerIDInRoot finds a container ID in a mountinfo root field, such as
// /var/lib/docker/containers/<id>/hostname.
var containerIDInRoot = regexp.MustCompile(`/containers/([0-9a-f]{64})/`)

// selfImage returns the image this box runs, asked of the engine about this
// very container (found from the engine's files mounted in: hostname,
// hosts, resolv.conf); else the image of the first container it lists. The
// sibling the probe starts then needs nothing the host lacks.
func (a *engineAPI) selfImage(ctx context.Context) (string, error) {
	var ids []string
	if ms, err := readMountinfo(); err == nil {
		for _, m := range ms {
			if s := containerIDInRoot.FindStringSubmatch(m.Root); s != nil {
				ids = append(ids, s[1])
				break
			}
		}
	}
	if h, err := os.Hostname(); err == nil && len(h) >= 12 {
		ids = append(ids, h)
	}
	for _, id := range ids {
		var c struct {
			Image string `json:"Image"`
		}
		if err := a.call(ctx, "inspecting this container", http.MethodGet, "/containers/"+url.PathEscape(id)+"/json", nil, &c); err == nil && c.Image != "" {
			return c.Image, nil
		}
	}
	var list []struct {
		ImageID string `json:"ImageID"`
	}
	if err := a.call(ctx, "listing containers", http.MethodGet, "/containers/json?limit=1", nil, &list); err != nil {
		return "", err
	}
	if len(list) == 0 || list[0].ImageID == "" {
		return "", errors.New("no image to start a sibling from")
	}
	return list[0].ImageID, nil
}

// teardownLabels marks what a teardown probe creates.
func teardownLabels(p probes.Params) map[string]string {
	l := map[string]string{probes.LabelTeardownToken: p.Token}
	if p.RunID != "" {
		l[probes.LabelRun] = p.RunID
	}
	return l
}

// sibling describes a container a teardown probe creates next to its box.
type sibling struct {
	start   bool              // start it (a process that runs on the host) or only create it
	env     []string          // its environment
	mounts  []map[string]any  // engine Mounts
	network string            // "none" or a network the probe created
	extra   map[string]string // more labels
}

// siblingLifetime bounds a started sibling's process, should the harness
// never remove it.
const siblingLifetime = "60"

// createSibling creates (and, when asked, starts) a container from this
// box's image, with no network unless told, a small pids limit and a
// bounded sleep as its only process. It returns the container's ID.
func (a *engineAPI) createSibling(ctx context.Context, p probes.Params, name string, s sibling) (string, error) {
	img, err := a.selfImage(ctx)
	if err != nil {
		return "", err
	}
	labels := teardownLabels(p)
	for k, v := range s.extra {
		labels[k] = v
	}
	network := s.network
	if network == "" {
		network = "none"
	}
	pids := 16
	body := map[string]any{
		"Image":      img,
		"Entrypoint": []string{"sleep"},
		"Cmd":        []string{siblingLifetime},
		"Env":        s.env,
		"Labels":     labels,
		"HostConfig": map[string]any{"NetworkMode": network, "PidsLimit": pids, "Memory": 32 << 20, "Mounts": s.mounts},
	}
	if network == "none" {
		body["NetworkDisabled"] = true
	}
	var created struct {
		ID string `json:"Id"`
	}
	if err := a.call(ctx, "creating container "+name, http.MethodPost, "/containers/create?name="+url.QueryEscape(name), body, &created); err != nil {
		return "", err
	}
	if !s.start {
		return created.ID, nil
	}
	if err := a.call(ctx, "starting container "+name, http.MethodPost, "/containers/"+url.PathEscape(created.ID)+"/start", nil, nil); err != nil {
		return created.ID, err
	}
	return created.ID, nil
}

// teardownName names what a teardown probe creates: the token makes it
// findable and unique.
func teardownName(p probes.Params, what string) string {
	return "sandcheck-td-" + fileSafe(p.Token) + "-" + what
}

// refusedByEngine reports whether err is the engine saying no (an
// authorization plugin, a rootless engine's limits), not a failure to ask.
func refusedByEngine(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status >= 400 && ae.status < 500 && !strings.Contains(ae.msg, "No such image")
}
