# no-ambient-cloud-identity from the runtime view: no credential-shaped
# names in the sandbox's environment, no credential folders mounted. The
# metadata and secrets probes add what the box itself could reach.
package sandcheck.criteria

import rego.v1

secret_env := `(?i)(^AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN)$|^GOOGLE_APPLICATION_CREDENTIALS$|^AZURE_CLIENT_(SECRET|CERTIFICATE_PATH)$|TOKEN|SECRET|PASSW|API_?KEY|PRIVATE_KEY|CREDENTIAL)`

credential_paths := ["/var/run/secrets", "/root/.aws", "/root/.config/gcloud", "/root/.azure", "/root/.kube", "/root/.docker"]

deny_ambient_env contains finding("no-ambient-cloud-identity", "", msg) if {
	some v in views
	known_fact(v.view, "env_names")
	some name in list(v.view.env_names)
	regex.match(secret_env, name)
	msg := sprintf("sandbox %s has credential-shaped environment variable %s (runtime view)", [v.name, name])
}

deny_ambient_mount contains finding("no-ambient-cloud-identity", "", msg) if {
	some v in views
	some m in list(v.view.mounts)
	some p in credential_paths
	startswith(m.destination, p)
	msg := sprintf("sandbox %s mounts %s at credential path %s (runtime view)", [v.name, m.source, m.destination])
}

unconfirmed_ambient_env contains finding("no-ambient-cloud-identity", "", msg) if {
	some v in views
	unknown_fact(v.view, "env_names")
	msg := sprintf("sandbox %s: the runtime could not list its environment", [v.name])
}

pass_ambient_env contains finding("no-ambient-cloud-identity", "", msg) if {
	some v in views
	known_fact(v.view, "env_names")
	not any_secret_env(v.view)
	msg := sprintf("sandbox %s has no credential-shaped environment variables (runtime view)", [v.name])
}

any_secret_env(view) if {
	some name in list(view.env_names)
	regex.match(secret_env, name)
}
