#!/bin/sh
# page_worker.sh FILE: a worker that runs until it is stopped; in the
# first attempt, rank 1 fails (exit 3) once FILE exists, its stderr
# carrying markup that must never run in the status page.
while :; do
	if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ -e "$1" ]; then
		echo 'boom <script>window.__pwned = 1; document.title = "pwned"</script>' >&2
		echo '<img src=x onerror="window.__pwned = 2; document.title = 'pwned'">' >&2
		exit 3
	fi
	sleep 0.1
done
