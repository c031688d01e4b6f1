package canary

import "slices"

// MetadataHostnames are the names cloud resolvers answer with their
// metadata service's address: GCP's two, and AWS's instance-data host. The
// DNS canary (not a filtering resolver) answers them with the harness's
// metadata address, as a cloud resolver would, so a probe can show that the
// names lead to credentials through the sandbox's resolver.
var MetadataHostnames = []string{"metadata.google.internal.", "metadata.goog.", "instance-data.ec2.internal."}

// isMetadataHostname reports whether a lower-cased, fully qualified name is
// one of MetadataHostnames.
func isMetadataHostname(name string) bool { return slices.Contains(MetadataHostnames, name) }
