/* Runs the bundle `net` (input `x`, output `y`, f32) on the floats of argv[1] and writes the outputs to argv[2]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s INPUT.bin OUTPUT.bin\n", argv[0]);
    return 2;
  }
  if (!net_cpu_supported()) {
    fprintf(stderr, "this CPU lacks the bundle's instruction set\n");
    return 1;
  }
  uint8_t *m = aligned_alloc(NET_MEM_ALIGN, (NET_MUTABLE_MEM_SIZE + NET_MEM_ALIGN - 1) / NET_MEM_ALIGN * NET_MEM_ALIGN);
  uint8_t *a = aligned_alloc(NET_MEM_ALIGN, (NET_ACTIVATIONS_MEM_SIZE + NET_MEM_ALIGN - 1) / NET_MEM_ALIGN * NET_MEM_ALIGN);
  if (!m || !a) return 1;
  memset(m, 0, NET_MUTABLE_MEM_SIZE);
  FILE *in = fopen(argv[1], "rb");
  if (!in || fread(m + NET_X_OFFSET, sizeof(float), NET_X_SIZE, in) != NET_X_SIZE) {
    fprintf(stderr, "%s: expected %d floats\n", argv[1], NET_X_SIZE);
    return 1;
  }
  fclose(in);
  net(NULL, m, a); /* NULL: the weights embedded in net.o */
  FILE *out = fopen(argv[2], "wb");
  if (!out || fwrite(m + NET_Y_OFFSET, sizeof(float), NET_Y_SIZE, out) != NET_Y_SIZE) return 1;
  fclose(out);
  free(m);
  free(a);
  return 0;
}
