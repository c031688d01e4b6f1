package targets

import (
	"errors"
	"strings"
	"testing"
)

func TestCommandAndGatewayErrors(t *testing.T) {
	head := "schema: sandcheck.dev/target/v1\nname: t\nimage: i\nprofile: no-network-transform\n"
	cmd := "runner: command\ncommand:\n  network: none\n  create: [tool, new]\n  exec: [tool, exec, \"${ID}\", \"${ARGV}\"]\n  copy_in: [tool, cp, \"${SRC}\", \"${ID}:${DST}\"]\n  destroy: [tool, rm, \"${ID}\"]\n"
	gw := "runner: gateway\ngateway:\n  url: http://127.0.0.1:1\n  admin_key_env: K\n  runtime_profile: session\n  task_response: {exit_code: c, stdout: o}\n"
	if _, err := Parse("ok.yaml", []byte(head+cmd)); err != nil {
		t.Fatalf("a valid command target: %v", err)
	}
	if _, err := Parse("ok.yaml", []byte(head+gw)); err != nil {
		t.Fatalf("a valid gateway target: %v", err)
	}
	cases := []struct{ name, src, want string }{
		{"unknown variable", strings.Replace(cmd, `"${ID}", "${ARGV}"`, `"${ID}", "${ARGV}", "${SRC}"`, 1), "$.command.exec[4]: ${SRC} is not a variable of this step"},
		{"splat inside a word", strings.Replace(cmd, `"${ARGV}"`, `"x${ARGV}"`, 1), "must be a word of its own"},
		{"no argv", strings.Replace(cmd, `, "${ARGV}"`, "", 1), "must pass the command through ${ARGV}"},
		{"no destroy", strings.Replace(cmd, "  destroy: [tool, rm, \"${ID}\"]\n", "", 1), "$.command.destroy: is required"},
		{"env args without env_arg", strings.Replace(cmd, "[tool, new]", `[tool, new, "${ENV_ARGS}"]`, 1), "$.command.env_arg: is required"},
		{"network", strings.Replace(cmd, "network: none", "network: host", 1), `$.command.network: "host" is not one of`},
		{"no task mapping", strings.Replace(gw, "  task_response: {exit_code: c, stdout: o}\n", "", 1), "$.gateway.task_response: is required"},
		{"key in the file", strings.Replace(gw, "admin_key_env: K", "admin_key_env: sk-123", 1), "$.gateway.admin_key_env"},
		{"ephemeral", strings.Replace(gw, "session", "ephemeral-task", 1), "ephemeral-task is not supported"},
		{"url with a path", strings.Replace(gw, "http://127.0.0.1:1", "http://127.0.0.1:1/v1", 1), "$.gateway.url"},
	}
	for _, c := range cases {
		_, err := Parse("t.yaml", []byte(head+c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// A command target naming a program this machine lacks passes Parse (it
// reads no host) and fails CheckPrograms with file, line, field and program.
func TestCheckPrograms(t *testing.T) {
	src := "schema: sandcheck.dev/target/v1\nname: t\nimage: i\nprofile: no-network-transform\nrunner: command\ncommand:\n  network: none\n" +
		"  create: [sandcheck-no-such-tool, new]\n" +
		"  exec: [sh, -c, \"${ARGV_SHELL}\"]\n" +
		"  copy_in: [sh, -c, \"${SRC}${ID}${DST}\"]\n" +
		"  destroy: [./no-such-script, \"${ID}\"]\n" +
		"  list: [sh, -c, ls]\n"
	tg, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	err = tg.CheckPrograms()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	for _, want := range []string{
		`t.yaml:8:12: $.command.create[0]: program "sandcheck-no-such-tool" cannot be run here: executable file not found in $PATH`,
		`t.yaml:11:13: $.command.destroy[0]: program "./no-such-script" cannot be run here`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "exec[0]") || strings.Contains(err.Error(), "list[0]") {
		t.Errorf("a program that exists was refused: %v", err)
	}
	ok := strings.NewReplacer("sandcheck-no-such-tool", "sh", "./no-such-script", "sh").Replace(src)
	tg, err = Parse("t.yaml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.CheckPrograms(); err != nil {
		t.Fatalf("programs on PATH: %v", err)
	}
	if err := (&Target{}).CheckPrograms(); err != nil {
		t.Fatalf("no command section: %v", err)
	}
}
