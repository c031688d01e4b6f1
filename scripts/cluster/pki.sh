# The cluster's certificates and keys (sourced by up.sh): one CA, the API
# server's serving certificate, the service-account signing key and one
# client certificate per component. Made once; kept in $CLUSTER_PKI.

# pki_client NAME CN [ORG]: a client certificate signed by the CA.
pki_cert() {
	local name=$1 cn=$2 org=$3 ext=$4
	local subj="/CN=$cn"
	[[ -n $org ]] && subj="/O=$org/CN=$cn"
	openssl req -new -newkey rsa:2048 -nodes -keyout "$CLUSTER_PKI/$name.key" \
		-subj "$subj" -out "$CLUSTER_PKI/$name.csr" 2>/dev/null
	openssl x509 -req -in "$CLUSTER_PKI/$name.csr" -CA "$CLUSTER_PKI/ca.crt" -CAkey "$CLUSTER_PKI/ca.key" \
		-CAcreateserial -days 3650 -sha256 -extfile <(printf '%s\n' "$ext") \
		-out "$CLUSTER_PKI/$name.crt" 2>/dev/null
	rm -f "$CLUSTER_PKI/$name.csr"
}

pki_make() {
	[[ -s $CLUSTER_PKI/done ]] && return 0
	mkdir -p "$CLUSTER_PKI"
	chmod 700 "$CLUSTER_PKI"
	openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$CLUSTER_PKI/ca.key" -days 3650 \
		-subj "/CN=sandcheck-cluster-ca" -out "$CLUSTER_PKI/ca.crt" 2>/dev/null
	local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
	pki_cert apiserver kube-apiserver "" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,IP:127.0.0.1,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
	pki_cert kubelet "system:node:$NODE_NAME" system:nodes "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
	pki_cert admin sandcheck-admin system:masters "$client"
	pki_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "$client"
	pki_cert controller-manager system:kube-controller-manager "" "$client"
	pki_cert scheduler system:kube-scheduler "" "$client"
	openssl genrsa -out "$CLUSTER_PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$CLUSTER_PKI/sa.key" -pubout -out "$CLUSTER_PKI/sa.pub" 2>/dev/null
	date -u +%FT%TZ >"$CLUSTER_PKI/done"
}

# pki_kubeconfig NAME FILE: a kubeconfig for the client certificate NAME.
pki_kubeconfig() {
	local name=$1 file=$2
	cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: sandcheck
  cluster:
    server: $API_URL
    certificate-authority: $CLUSTER_PKI/ca.crt
users:
- name: $name
  user:
    client-certificate: $CLUSTER_PKI/$name.crt
    client-key: $CLUSTER_PKI/$name.key
contexts:
- name: sandcheck
  context: {cluster: sandcheck, user: $name}
current-context: sandcheck
KC
	chmod 600 "$file"
}
