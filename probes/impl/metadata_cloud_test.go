package impl

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandcheck/sandcheck/canary"
	"github.com/sandcheck/sandcheck/probes"
)

// TestCloudMetadataProbesAgainstCanaries runs the ECS and Alibaba probes
// against the harness's own canaries, served on loopback.
func TestCloudMetadataProbesAgainstCanaries(t *testing.T) {
	m := canary.NewMetadata(canary.MetadataOptions{})
	ecs := httptest.NewServer(m.ECS())
	defer ecs.Close()
	ali := httptest.NewServer(m.Alibaba())
	defer ali.Close()
	p := probes.Params{Token: "tokC", ECSAddr: strings.TrimPrefix(ecs.URL, "http://"), AlibabaAddr: strings.TrimPrefix(ali.URL, "http://")}

	t.Setenv(ecsRelativeURIEnv, "/v2/credentials/abc-123")
	r := metadataECSTaskRole(context.Background(), p)
	if r.Outcome != probes.Escaped || r.Evidence["access_key_id"] != m.Honey().AWS.AccessKeyID || r.Evidence["path_source"] != "environment" {
		t.Errorf("ecs: %s %v", r.Outcome, r.Evidence)
	}
	r = metadataAlibaba(context.Background(), p)
	if r.Outcome != probes.Escaped || r.Evidence["role"] != m.Honey().AlibabaRoleName || r.Evidence["access_key_id"] != m.Honey().AlibabaAccessKeyID {
		t.Errorf("alibaba: %s %v", r.Outcome, r.Evidence)
	}
	for _, v := range []string{m.Honey().AWS.SecretAccessKey, m.Honey().AlibabaAccessKeySecret, m.Honey().AlibabaSecurityToken} {
		for k, e := range r.Evidence {
			if strings.Contains(e, v) {
				t.Errorf("evidence %s carries a secret", k)
			}
		}
	}
	var got []string
	for _, h := range m.Recorder().ByToken("tokC") {
		got = append(got, h.Service+" "+h.Probe+" "+h.Path)
	}
	want := []string{
		"ecs-credentials metadata.ecs-task-role /v2/credentials/abc-123",
		"alibaba-metadata metadata.alibaba /latest/meta-data/ram/security-credentials/",
		"alibaba-metadata metadata.alibaba /latest/meta-data/ram/security-credentials/" + m.Honey().AlibabaRoleName,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("canary hits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// An unsafe relative URI from the environment is not used.
	t.Setenv(ecsRelativeURIEnv, "/../x")
	if r := metadataECSTaskRole(context.Background(), p); r.Evidence["path_source"] != "guessed" {
		t.Errorf("ecs with an unsafe relative URI: %v", r.Evidence)
	}
}

// TestCloudMetadataProbesSendNothingWithoutAddress: with no address from
// the harness the probes fall back to nothing (never the real addresses).
func TestCloudMetadataProbesSendNothingWithoutAddress(t *testing.T) {
	for name, f := range map[string]Func{"ecs": metadataECSTaskRole, "alibaba": metadataAlibaba} {
		r := f(context.Background(), probes.Params{Token: "t"})
		if r.Evidence["sent"] != "false" || r.Outcome == probes.Escaped {
			t.Errorf("%s without an address: %s %v", name, r.Outcome, r.Evidence)
		}
	}
}
