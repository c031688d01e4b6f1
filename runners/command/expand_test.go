package command

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/runners"
)

func TestExpand(t *testing.T) {
	ea, err := envArgs([]string{"-e", "${KEY}=${VALUE}"}, map[string]string{"B": "2", "A": "x y"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := expand("exec", []string{"tool", "exec", "--id=${ID}", "${ENV_ARGS}", "${ARGV}", "sh", "-c", "${ARGV_SHELL}"}, vars{
		one:   map[string]string{"ID": "abc", "ARGV_SHELL": runners.ShellQuote([]string{"echo", "it's"})},
		splat: map[string][]string{"ARGV": {"a b", "c"}, "ENV_ARGS": ea},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tool", "exec", "--id=abc", "-e", "A=x y", "-e", "B=2", "a b", "c", "sh", "-c", `'echo' 'it'\''s'`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if _, err := expand("destroy", []string{"tool", "${ID}"}, vars{}); err == nil || !strings.Contains(err.Error(), "${ID} has no value") {
		t.Errorf("a variable without a value: %v", err)
	}
}
