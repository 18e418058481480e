/* Merge sort of a random array, instrumented with `gaspard cc --profile`:
 * every function's entry and exit, every malloc and free, and a pupc.h user
 * event per pass.
 *
 *   gaspard cc --profile -- cc -g sort.c -o sort && gaspard run -- ./sort 4096 */
#include <pupc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void merge(int *a, int n, int mid) {
  int *tmp = malloc(n * sizeof *tmp);
  int i = 0, j = mid, k = 0;
  while (i < mid && j < n) tmp[k++] = a[i] <= a[j] ? a[i++] : a[j++];
  while (i < mid) tmp[k++] = a[i++];
  while (j < n) tmp[k++] = a[j++];
  memcpy(a, tmp, n * sizeof *tmp);
  free(tmp);
}

void sort(int *a, int n) {
  if (n < 2) return;
  sort(a, n / 2);
  sort(a + n / 2, n - n / 2);
  merge(a, n, n / 2);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1024;
  unsigned pass = pupc_create_event("pass", "%d");
  int *a = malloc(n * sizeof *a);
  for (int p = 0; p < 2; p++) {
    pupc_event_start(pass, p);
    srand(p + 1);
    for (int i = 0; i < n; i++) a[i] = rand();
    sort(a, n);
    pupc_event_end(pass, p);
  }
  for (int i = 1; i < n; i++)
    if (a[i - 1] > a[i]) return 1;
  printf("sort: %d numbers sorted twice\n", n);
  free(a);
  return 0;
}
