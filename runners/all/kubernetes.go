//go:build kubernetes

package all

// The kubernetes runner needs client-go, whose module graph this build
// cannot fetch yet (see runners/kubernetes/doc.go): it is built in with
// -tags kubernetes.
import _ "github.com/sandcheck/sandcheck/runners/kubernetes"
