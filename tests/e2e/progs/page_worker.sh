#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# page_worker.sh FILE [xss]: a worker that runs until it is stopped; in the
# first attempt, rank 1 fails once FILE exists. Its stderr is what a
# training script's crash looks like (a Python traceback, exit 1): the
# status page's screenshot shows it. With "xss" its stderr carries markup
# that must never run in the status page instead (exit 3).
while :; do
	if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ -e "$1" ]; then
		if [ "${2:-}" = xss ]; then
			echo 'boom <script>window.__pwned = 1; document.title = "pwned"</script>' >&2
			echo '<img src=x onerror="window.__pwned = 2; document.title = 'pwned'">' >&2
			exit 3
		fi
		cat >&2 <<'TRACE'
Traceback (most recent call last):
  File "/home/ml/resnet/train.py", line 214, in <module>
    main()
  File "/home/ml/resnet/train.py", line 188, in main
    loss = train_step(model, batch, optimizer)
  File "/home/ml/resnet/train.py", line 141, in train_step
    out = model(images)
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total capacity; 77.31 GiB already allocated)
TRACE
		exit 1
	fi
	sleep 0.1
done
