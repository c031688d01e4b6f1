package targets_test

// The runners' sections are decoded by their own packages, registered in
// their init: the fixtures load here as they do in the CLI, with every
// backend built in.
import _ "github.com/sandcheck/sandcheck/runners/all"
