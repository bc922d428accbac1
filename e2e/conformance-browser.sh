#!/usr/bin/env bash
# The browser of conformance-client.sh: the conformance suite's authorization endpoint
# approves at once and redirects to the client's loopback listener, so following the
# redirects is the whole user interaction.
exec curl --silent --show-error --location --max-redirs 5 --output /dev/null "$1"
