#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_http.sh - hostile and heavy clients against dlaunch-rdzv:
# oversized bodies, bad Content-Length, huge headers, malformed / deep /
# wrongly typed JSON, odd node ids and paths, missing or wrong token,
# plaintext to the TLS port, slow clients holding connections, and 100
# concurrent joins. The checks themselves are in rdzv_hostile.py; after
# each group the server must still be alive and serving.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv

# hostile PREFIX ARGS...: run rdzv_hostile.py, pass its lines on
hostile() {
	local prefix=$1 line
	shift
	while IFS= read -r line; do
		case "$line" in
		"ok - "*) ok "$prefix: ${line#ok - }" ;;
		"not ok - "*) not_ok "$prefix: ${line#not ok - }" ;;
		"exit 0") ;;
		"exit "*) not_ok "$prefix: rdzv_hostile.py ended with status ${line#exit } (see the log)" ;;
		*) echo "# $line" ;;
		esac
	done < <(timeout -k 5 150 "$PY" "$FAULTS_DIR/rdzv_hostile.py" "$@" 2>&1;
		echo "exit $?")
}

server_survives() {
	check "$1: dlaunch-rdzv is still running" alive "$RDZV_PID"
	if ! alive "$RDZV_PID"; then show_log "$RDZV_LOG" 30; fi
}

# end_group WHAT: the checker (no process left; the server's detail of
# every job the clients made), then stop the server
end_group() {
	check_case "$1"
	stop_rdzv
}

# ---- hostile input, slow clients, many joins (no token) -------------------
if start_rdzv; then
	hostile "hostile input" input 127.0.0.1 "$RDZV_PORT"
	server_survives "hostile input"
	hostile "slow clients" slow 127.0.0.1 "$RDZV_PORT"
	server_survives "slow clients"
	hostile "concurrent joins" joins 127.0.0.1 "$RDZV_PORT" 100
	server_survives "concurrent joins"
	end_group "hostile input, slow clients, concurrent joins"
else
	not_ok "hostile input: dlaunch-rdzv did not start"
fi

# ---- idle clients are cut off ---------------------------------------------
if start_rdzv --idle-timeout 2s; then
	hostile "idle timeout" idle 127.0.0.1 "$RDZV_PORT" 2
	server_survives "idle timeout"
	end_group "idle timeout"
else
	not_ok "idle timeout: dlaunch-rdzv --idle-timeout did not start"
fi

# ---- token ------------------------------------------------------------------
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$token" >"$TEST_TMP/token"
chmod 600 "$TEST_TMP/token"
RDZV_TOKEN=$token # the checker's own requests carry it
if start_rdzv --token-file "$TEST_TMP/token"; then
	hostile "token" auth 127.0.0.1 "$RDZV_PORT" "$token"
	server_survives "token"
	end_group "token"
else
	not_ok "token: dlaunch-rdzv --token-file did not start"
fi
RDZV_TOKEN=

# ---- plaintext to the TLS port ----------------------------------------------
if openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost \
	-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -days 1 \
	-keyout "$TEST_TMP/key.pem" -out "$TEST_TMP/cert.pem" >/dev/null 2>&1; then
	if start_rdzv --tls-cert "$TEST_TMP/cert.pem" --tls-key "$TEST_TMP/key.pem"; then
		hostile "tls" plain-to-tls 127.0.0.1 "$RDZV_PORT" "$TEST_TMP/cert.pem"
		server_survives "tls"
		end_group "tls"
	else
		not_ok "tls: dlaunch-rdzv --tls-cert/--tls-key did not start"
	fi
else
	skip "tls: openssl could not make a self-signed certificate"
fi

finish
