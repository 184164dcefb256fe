/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_site.c - the sitecustomize that gives plain Python workers a way
 * to show their stacks, with no change to the script.
 *
 * The agent writes it once into LOG_DIR/.dlaunch-site/ and puts that
 * directory first on each worker's PYTHONPATH (workers.c), with
 * DLAUNCH_PYSTACK_FILE naming a file in the worker's log directory.
 * Python imports sitecustomize at start-up; this one
 *   - takes its own directory out of PYTHONPATH again (os.environ gets
 *     back the value it had, unset if it had none) and out of sys.path,
 *     so the script and its children see what they would without dlaunch;
 *   - in the first Python process of the worker only (the variable is
 *     removed after), opens the file for appending and registers
 *     faulthandler for SIGUSR2 on it (every thread's stack, the current
 *     one included) with SA_RESTART (a system call the signal interrupts
 *     is restarted), then writes its pid to FILE.pid, which tells the
 *     agent that the signal is safe to send and to which process;
 *   - imports the user's own sitecustomize, if one is further on the path.
 * Nothing it does may stop the worker: every step is in a try.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dlaunch/fsutil.h"
#include "dlaunch/log.h"
#include "hang.h"

static const char site_py[] =
    "# SPDX-License-Identifier: Apache-2.0\n"
    "# dlaunch's sitecustomize (docs/hangs.md): stacks on SIGUSR2, then the\n"
    "# user's own sitecustomize. Written by the agent; do not edit.\n"
    "import os, sys\n"
    "\n"
    "\n"
    "def _dlaunch_setup():\n"
    "    here = os.path.dirname(os.path.abspath(__file__))\n"
    "    old = os.environ.get('PYTHONPATH')\n"
    "    if old is not None:\n"
    "        parts = old.split(os.pathsep)\n"
    "        if parts and parts[0] == here:\n"
    "            rest = os.pathsep.join(parts[1:])\n"
    "            if len(parts) > 1:\n"
    "                os.environ['PYTHONPATH'] = rest\n"
    "            else:\n"
    "                del os.environ['PYTHONPATH']\n"
    "    sys.path[:] = [p for p in sys.path\n"
    "                   if os.path.abspath(p or '.') != here]\n"
    "    path = os.environ.pop('DLAUNCH_PYSTACK_FILE', None)\n"
    "    if path:\n"
    "        try:\n"
    "            import faulthandler, signal\n"
    "            f = open(path, 'a')\n"
    "            faulthandler.register(signal.SIGUSR2, file=f,\n"
    "                                  all_threads=True, chain=False)\n"
    "            # faulthandler installs it without SA_RESTART: a system\n"
    "            # call the signal lands in (a TCPStore connect) must be\n"
    "            # restarted, not fail with EINTR\n"
    "            signal.siginterrupt(signal.SIGUSR2, False)\n"
    "            faulthandler._dlaunch_pystack = f  # kept open\n"
    "            tmp = path + '.pid.tmp'\n"
    "            with open(tmp, 'w') as p:\n"
    "                p.write('%d\\n' % os.getpid())\n"
    "            os.rename(tmp, path + '.pid')\n"
    "        except Exception as e:\n"
    "            sys.stderr.write('dlaunch: no Python stacks on SIGUSR2: '\n"
    "                             '%s\\n' % e)\n"
    "    return here\n"
    "\n"
    "\n"
    "def _dlaunch_chain(here):\n"
    "    import importlib.machinery, importlib.util\n"
    "    path = [p for p in sys.path if os.path.abspath(p or '.') != here]\n"
    "    spec = importlib.machinery.PathFinder.find_spec('sitecustomize',\n"
    "                                                    path)\n"
    "    if spec is None or spec.loader is None:\n"
    "        return\n"
    "    mod = importlib.util.module_from_spec(spec)\n"
    "    sys.modules['sitecustomize'] = mod\n"
    "    spec.loader.exec_module(mod)\n"
    "\n"
    "\n"
    "try:\n"
    "    _dlaunch_chain(_dlaunch_setup())\n"
    "except Exception as e:\n"
    "    sys.stderr.write('dlaunch sitecustomize: %s\\n' % e)\n";

int hang_site_dir(const char *log_dir, char *out, size_t size)
{
	char file[4200];
	if (snprintf(out, size, "%s/%s", log_dir, HANG_SITE_DIR) >= (int)size ||
	    snprintf(file, sizeof(file), "%s/sitecustomize.py", out) >=
		(int)sizeof(file))
		return -1;
	if (mkdir(out, 0755) != 0 && errno != EEXIST &&
	    fs_mkdir_p(out, 0755) != 0) {
		log_warn("cannot create %s: %s; Python workers' stacks come "
			 "from their control channel only",
			 out, strerror(errno));
		return -1;
	}
	if (fs_write_file_atomic(file, site_py, sizeof(site_py) - 1, 0644) !=
	    0) {
		log_warn("cannot write %s: %s; Python workers' stacks come "
			 "from their control channel only",
			 file, strerror(errno));
		return -1;
	}
	return 0;
}
