# Shell helpers for scripts that start local servers on 127.0.0.1 (sourced, not run).

# Prints a free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Waits up to $2 seconds for $1 to answer 200; returns 1 if it never does.
wait_http() {
  local url=$1 limit=$2 i
  for ((i = 0; i < limit * 10; i++)); do
    if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}
