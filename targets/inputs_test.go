package targets

import (
	"errors"
	"strings"
	"testing"
)

const inputsHead = "schema: sandcheck.dev/target/v1\nname: x\nrunner: docker\nimage: i\nprofile: high-risk-code\n"

func TestInputsDeclaration(t *testing.T) {
	tg, err := Parse("t.yaml", []byte(inputsHead+"docker:\n  runtime: runc\n  network: none\ninputs:\n  path: /inputs\n  read_only: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tg.Inputs == nil || tg.Inputs.Path != "/inputs" || !tg.Inputs.ReadOnly {
		t.Errorf("inputs %+v, want /inputs read-only", tg.Inputs)
	}
	for name, c := range map[string]struct{ src, want string }{
		"relative":    {"docker:\n  runtime: runc\n  network: none\ninputs:\n  path: inputs\n", "$.inputs.path"},
		"root":        {"docker:\n  runtime: runc\n  network: none\ninputs:\n  path: /\n", "$.inputs.path"},
		"reserved":    {"docker:\n  runtime: runc\n  network: none\ninputs:\n  path: /.sandcheck/in\n", "reserved"},
		"in output":   {"docker:\n  runtime: runc\n  network: none\noutput:\n  path: /work\n  release: bind\ninputs:\n  path: /work/in\n", "overlaps the output folder"},
		"on a mount":  {"docker:\n  runtime: runc\n  network: none\n  mounts:\n    - {source: /srv, target: /inputs}\ninputs:\n  path: /inputs\n", "overlaps the mount target"},
		"on a tmpfs":  {"docker:\n  runtime: runc\n  network: none\n  tmpfs:\n    - {path: /data, size: 1Mi}\ninputs:\n  path: /data/inputs\n", "overlaps the tmpfs"},
		"unknown key": {"docker:\n  runtime: runc\n  network: none\ninputs:\n  path: /inputs\n  writable: true\n", "t.yaml:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(inputsHead+c.src))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrInvalid naming %q", err, c.want)
			}
		})
	}
}
