#!/bin/sh
# A parallel C build, as `make -j2` runs one: make forks a shell and a
# compiler (cc1, as) per file, each a short-lived process. The sources are
# generated (FILES files, 24 unless set, of 60 small functions) into a
# fresh directory under $TMPDIR so that copies never share object files.
set -eu
dir=$(mktemp -d "${TMPDIR:-/tmp}/herd-build.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/src"
i=1
while [ $i -le "${FILES:-24}" ]; do
    awk -v f=$i 'BEGIN {
        for (k = 1; k <= 60; k++)
            printf "static int g%d(int x){ int s=0; for(int i=0;i<x;i++) s+=i*%d^(s>>3); return s; }\n", k, k
        printf "int f%d(int x){ return 0", f
        for (k = 1; k <= 60; k++) printf "+g%d(x)", k
        print "; }"
    }' > "$dir/src/f$i.c"
    i=$((i + 1))
done
printf 'OBJ=$(patsubst %%.c,%%.o,$(wildcard src/*.c))\nall: $(OBJ)\n%%.o: %%.c\n\tcc -O2 -c $< -o $@\n' > "$dir/Makefile"
make -s -C "$dir" -j"${JOBS:-2}"
