package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestAPICalls: each call the runner makes goes to the path client-go's
// typed clients use, with the verb, body and answer they have, and the API
// server's refusals keep their reason for apierrors.
func TestAPICalls(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var meta metav1.TypeMeta
		json.Unmarshal(body, &meta)
		mu.Lock()
		got = append(got, strings.TrimSpace(fmt.Sprintf("%s %s %s", req.Method, req.URL.Path, meta.Kind)))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		status := func(code int, reason metav1.StatusReason) {
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: string(reason)})
		}
		switch req.Method + " " + req.URL.Path {
		case "GET /version":
			fmt.Fprint(w, `{"gitVersion":"v1.99.0"}`)
		case "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
			fmt.Fprint(w, `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":true}}`)
		case "GET /apis/node.k8s.io/v1/runtimeclasses/gvisor":
			fmt.Fprint(w, `{"kind":"RuntimeClass","apiVersion":"node.k8s.io/v1","metadata":{"name":"gvisor"},"handler":"runsc"}`)
		case "POST /api/v1/namespaces", "POST /api/v1/namespaces/t1/serviceaccounts", "POST /apis/rbac.authorization.k8s.io/v1/namespaces/t1/roles":
			w.Write(body)
		case "DELETE /api/v1/namespaces/t1":
			if !strings.Contains(string(body), `"propagationPolicy":"Background"`) {
				t.Errorf("namespace delete body %s: want the propagation policy", body)
			}
			status(http.StatusNotFound, metav1.StatusReasonNotFound)
		case "GET /api/v1/namespaces/t1/pods/p":
			status(http.StatusNotFound, metav1.StatusReasonNotFound)
		case "POST /api/v1/namespaces/t1/pods":
			status(http.StatusConflict, metav1.StatusReasonAlreadyExists)
		case "PUT /api/v1/namespaces/t1/pods/p/ephemeralcontainers":
			status(http.StatusForbidden, metav1.StatusReasonForbidden)
		case "GET /api/v1/namespaces/t1/events":
			fmt.Fprint(w, `{"kind":"EventList","apiVersion":"v1","items":[{"metadata":{"name":"e"},"reason":"Pulled"}]}`)
		default:
			t.Errorf("unexpected request %s %s", req.Method, req.URL)
			status(http.StatusNotFound, metav1.StatusReasonNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	cs, err := newClients(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if v, err := cs.serverVersion(ctx); err != nil || v.GitVersion != "v1.99.0" {
		t.Errorf("server version: %v, %v", v, err)
	}
	if rev, err := cs.createAccessReview(ctx, &authzv1.SelfSubjectAccessReview{}); err != nil || !rev.Status.Allowed {
		t.Errorf("access review: %v, %v", rev, err)
	}
	if rc, err := cs.getRuntimeClass(ctx, "gvisor"); err != nil || rc.Handler != "runsc" {
		t.Errorf("runtime class: %v, %v", rc, err)
	}
	if err := cs.createNamespace(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t1"}}); err != nil {
		t.Errorf("creating namespace: %v", err)
	}
	if err := create(ctx, cs.core, "t1", "serviceaccounts", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("creating service account: %v", err)
	}
	if err := create(ctx, cs.rbac, "t1", "roles", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"}}, &rbacv1.Role{}); err != nil {
		t.Errorf("creating role: %v", err)
	}
	bg := metav1.DeletePropagationBackground
	if err := cs.deleteNamespace(ctx, "t1", metav1.DeleteOptions{PropagationPolicy: &bg}); !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace: want NotFound, got %v", err)
	}
	if _, err := cs.getPod(ctx, "t1", "p"); !apierrors.IsNotFound(err) {
		t.Errorf("getting pod: want NotFound, got %v", err)
	}
	if _, err := cs.createPod(ctx, "t1", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating pod: want AlreadyExists, got %v", err)
	}
	if _, err := cs.updateEphemeralContainers(ctx, "t1", "p", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}); !apierrors.IsForbidden(err) {
		t.Errorf("adding an ephemeral container: want Forbidden, got %v", err)
	}
	if l, err := cs.listEvents(ctx, "t1", metav1.ListOptions{}); err != nil || len(l.Items) != 1 || l.Items[0].Reason != "Pulled" {
		t.Errorf("listing events: %v, %v", l, err)
	}
	want := []string{"GET /version", "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews SelfSubjectAccessReview",
		"GET /apis/node.k8s.io/v1/runtimeclasses/gvisor", "POST /api/v1/namespaces Namespace",
		"POST /api/v1/namespaces/t1/serviceaccounts ServiceAccount", "POST /apis/rbac.authorization.k8s.io/v1/namespaces/t1/roles Role",
		"DELETE /api/v1/namespaces/t1 DeleteOptions", "GET /api/v1/namespaces/t1/pods/p", "POST /api/v1/namespaces/t1/pods Pod",
		"PUT /api/v1/namespaces/t1/pods/p/ephemeralcontainers Pod", "GET /api/v1/namespaces/t1/events"}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
