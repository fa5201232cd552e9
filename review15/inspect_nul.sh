#!/bin/bash
# REPRO (review15, minor): node data with a NUL byte (any raw client) is
# cut at the NUL in the table, in "id" and in "id_hex", which zkr(1) and
# --help describe as "the exact bytes".
# Usage: ZKR_SERVER=host:port bash review15/inspect_nul.sh
cd "$(dirname "$0")/.." || exit 1
./zkr lock /review15/nul -- sleep 5 & z=$!
sleep 1.5
n=$(./tests/zkq "$ZKR_SERVER" ls /review15/nul)
printf 'ab\0cd\xe2\x80\xaeevil' | ./tests/zkq "$ZKR_SERVER" set "/review15/nul/$n"
./zkr inspect --json /review15/nul
wait $z
