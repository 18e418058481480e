# gaspard: the two set-up commands are `make demo` and `make test`.
PREFIX ?= /usr/local
VERSION := 0.1.0
CC ?= cc
OUT := out

.PHONY: deps build demo examples test bench fuzz install clean

deps:
	@bash scripts/install-deps.sh

build: deps
	cargo build --release

# Build, run the bundled example under gaspard, and print its report.
demo: build
	@mkdir -p $(OUT)
	$(CC) -O2 -pthread -I crates/gasp/include examples/gasp/heat.c \
	  -L target/release -Wl,-rpath,$(CURDIR)/target/release -lgaspard -o $(OUT)/heat
	rm -rf $(OUT)/heat-trace
	target/release/gaspard run -o $(OUT)/heat-trace -- $(OUT)/heat 200
	target/release/gaspard report $(OUT)/heat-trace

# Every bundled example (OpenSHMEM, MPI one-sided, Coarray Fortran, OpenMP,
# instrumented C) under gaspard, each with its report.
examples: build
	@mkdir -p $(OUT)
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; G=$(CURDIR)/target/release/gaspard; \
	oshcc -g examples/shmem/heat.c -o $(OUT)/heat_shmem && rm -rf $(OUT)/t-shmem && \
	  $$G run -o $(OUT)/t-shmem -- oshrun -np 4 --oversubscribe --mca osc ^rdma $(OUT)/heat_shmem 50 && $$G report $(OUT)/t-shmem && \
	mpicc -g examples/mpi/rma_halo.c -o $(OUT)/rma_halo && rm -rf $(OUT)/t-mpi && \
	  $$G run -o $(OUT)/t-mpi -- mpirun -np 4 --oversubscribe $(OUT)/rma_halo 50 && $$G report $(OUT)/t-mpi && \
	caf -g examples/caf/jacobi.f90 -o $(OUT)/jacobi && rm -rf $(OUT)/t-caf && \
	  $$G run -o $(OUT)/t-caf -- cafrun -np 4 --oversubscribe $(OUT)/jacobi && $$G report $(OUT)/t-caf && \
	clang -fopenmp -g examples/openmp/cg.c -o $(OUT)/cg && rm -rf $(OUT)/t-omp && \
	  $$G run -o $(OUT)/t-omp -- $(OUT)/cg 30 && $$G report $(OUT)/t-omp && \
	$$G cc --profile -- cc -g examples/c/sort.c -o $(OUT)/sort && rm -rf $(OUT)/t-c && \
	  $$G run -o $(OUT)/t-c -- $(OUT)/sort 4096 && $$G report $(OUT)/t-c

# The whole test suite (unit tests, real C programs driving the library, and
# an installed copy used through pkg-config).
test: deps
	cargo build --workspace
	bash scripts/check-install.sh
	cargo test --workspace --no-fail-fast

bench: deps
	@bash scripts/install-deps.sh --bench
	bash bench/run.sh

# Every fuzz target of fuzz/ for FUZZ_SECONDS seconds each (cargo-fuzz).
FUZZ_SECONDS ?= 60
fuzz:
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 target/release/gaspard $(DESTDIR)$(PREFIX)/bin/
	for c in cc mpicc oshcc caf; do ln -sf gaspard $(DESTDIR)$(PREFIX)/bin/gaspard-$$c; done
	install -m 755 target/release/libgaspard.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 target/release/libgaspard.a $(DESTDIR)$(PREFIX)/lib/
	for a in shmem mpi; do if [ -f target/release/libgaspard_$$a.so ]; then install -m 755 target/release/libgaspard_$$a.so $(DESTDIR)$(PREFIX)/lib/; fi; done
	install -m 644 crates/gasp/include/gasp.h crates/gasp/include/gasp_upc.h crates/gasp/include/gasp_omp.h crates/gasp/include/gasp_shmem.h crates/gasp/include/gasp_mpi.h crates/gasp/include/pupc.h \
	  $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' gaspard.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/gaspard.pc

clean:
	cargo clean
	rm -rf $(OUT)
