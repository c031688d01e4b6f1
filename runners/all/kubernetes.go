package all

// The kubernetes runner (client-go) registers itself like the others; it is
// imported from its own file so its owner can change it without touching
// all.go.
import _ "github.com/sandcheck/sandcheck/runners/kubernetes"
