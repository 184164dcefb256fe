# SPDX-License-Identifier: Apache-2.0
# man/: the man pages and the bash completion, made at build time from the
# binaries' own option tables, so they cannot drift from --help: each
# binary's --help writes its options as roff with DLAUNCH_HELP_FORMAT=man
# and as completion data with DLAUNCH_HELP_FORMAT=completion
# (common/opt_doc.c). man/fill.sh puts the options into the hand-written
# pages (man/*.in); man/completion.sh puts the tables before the completion
# functions (contrib/bash-completion/dlaunch.bash).

DLAUNCH_VERSION := $(shell contrib/version.sh)
DLAUNCH_DATE    := $(shell contrib/version.sh --date)

MAN_PAGES  := $(BUILD)/man/dlaunch.1 $(BUILD)/man/dlaunch-train.1 \
	$(BUILD)/man/dlaunch-rdzv.8
COMPLETION := $(BUILD)/completion/dlaunch

# the pages name the version, its date and the doc directory: this file
# changes (and the pages are made again) only when one of them does
MAN_STAMP := $(BUILD)/man/.version
$(MAN_STAMP): FORCE
	@mkdir -p $(@D)
	@printf '%s %s %s\n' '$(DLAUNCH_VERSION)' '$(DLAUNCH_DATE)' '$(DOCDIR)' \
		| cmp -s - $@ || printf '%s %s %s\n' '$(DLAUNCH_VERSION)' \
		'$(DLAUNCH_DATE)' '$(DOCDIR)' >$@

$(BUILD)/man/%: man/%.in man/fill.sh $(MAN_STAMP) $(BINS)
	$(call quiet,MAN)man/fill.sh $< $(BUILD)/bin '$(DLAUNCH_VERSION)' \
		'$(DLAUNCH_DATE)' '$(DOCDIR)' >$@

$(COMPLETION): contrib/bash-completion/dlaunch.bash man/completion.sh $(BINS)
	@mkdir -p $(@D)
	$(call quiet,GEN)man/completion.sh $(BUILD)/bin $< >$@

all: $(MAN_PAGES) $(COMPLETION)

.PHONY: FORCE man
FORCE:
man: $(MAN_PAGES) $(COMPLETION)
