#!/usr/bin/env python3
"""Independent reader and static checker for bundlec NPU transaction binaries (NAME.<segment>.txn).

Written from docs/npu-transaction-format.md alone (no bundlec source), to show that page suffices. For each file
it parses the header and every op, checks every rule the page states that needs no bound buffer or data memory
(sizes, op count, trailing bytes, opcodes, fixed field values, register addresses and tiles, DDR_PATCH records,
DMA local sides and store permissions, COMPUTE tiles, kernels and parameter-block placement), replays the
register file (BD and DMA channel words, locks and the DMA_LOAD_DONE / DMA_STORE_DONE / CORE_DONE counters,
all starting at 0) and checks that every MASKPOLL on a counter is satisfied. The AIE-ML data movement the
registers start (BDs, queues, locks, TCT tokens) is the emulator's to run: TCT fields are checked, MASKPOLLs on
DMA registers counted. MASKPOLLs on data words depend on data and are only
counted. Not checkable statically: bound buffer sizes (argplus / DDR rows vs. buffer size) and parameter blocks.

usage: read_txn.py [--quiet] [--json] [--device ROWS,COLS,MEMROWS] FILE.txn [...]
       read_txn.py --selftest FILE.txn   (mutates a valid file; every mutation must be rejected, none may crash)
Exit status: 0 when every file is valid, 1 otherwise (message: file, op index, byte offset, what).
"""
import argparse
import json
import random
import struct
import sys

OPS = {0: 'WRITE', 1: 'BLOCKWRITE', 3: 'MASKWRITE', 4: 'MASKPOLL', 128: 'TCT', 129: 'DDR_PATCH', 144: 'VNPU_DMA',
       145: 'VNPU_COMPUTE', 146: 'VNPU_KERNEL'}
FIXED_SIZE = {0: 24, 3: 32, 4: 32, 128: 16, 129: 48, 144: 44, 145: 24, 146: 16}
SIZE_FIELD_AT = {0: 20, 1: 12, 3: 24, 4: 24, 128: 4, 129: 4, 144: 4, 145: 4, 146: 4}
# AIE-ML DMA registers per tile kind (format page, "Tiles and the register map"): BD base, BDs, words per BD,
# channel control base, channels per direction, MM2S control offset, status base, MM2S status offset, lock base,
# locks.
DMA_MAP = {'shim': (0x1D000, 16, 8, 0x1D200, 2, 0x10, 0x1D220, 0x8, 0x14000, 16),
           'mem': (0xA0000, 48, 8, 0xA0600, 6, 0x30, 0xA0660, 0x20, 0xC0000, 64),
           'core': (0x1D000, 16, 6, 0x1DE00, 2, 0x10, 0x1DF00, 0x10, 0x1F000, 16)}
COUNTERS = ('DMA_LOAD_DONE', 'DMA_STORE_DONE', 'CORE_DONE')
KERNELS = {1: ('CONV', 80), 2: ('GEMM', 36), 3: ('EPILOGUE', 52), 4: ('ELTWISE', 68), 5: ('POOL', 68),
           6: ('GAP', 24)}
BUFFERS = ('in', 'out', 'scratch', 'const', 'super_instr')
READ_ONLY = (0, 3, 4)
CORE_LOCAL, MEM_LOCAL = 64 * 1024, 512 * 1024          # vnpu local_memory_bytes / mem_tile_bytes
BD_BASE, BD_STRIDE, BD_COUNT, BD_WORDS = 0x1D000, 0x20, 16, 8   # shim tile buffer descriptors
LOAD_DONE, STORE_DONE, CORE_DONE = 0x1DF00, 0x1DF04, 0x32000
M32, DDR_SPAN = 0xFFFFFFFF, 1 << 40
FMT = {k: struct.Struct(v) for k, v in {
    'hdr': '<BBBBBBHII', 'u32': '<I', 'write': '<BBB5xQII', 'block': '<BBB5xII', 'mask': '<BBB5xQIII4x',
    'patch': '<B3xIiII4xQQQ', 'dma': '<B3xIIIIIIIIII', 'compute': '<B3xIIIII'}.items()}


class TxnError(Exception):
    """A rule of the format is broken; the message says where and what."""


class Reader:
    def __init__(self, data, device=None):
        self.data, self.device = data, device
        self.idx, self.off, self.opname = None, 0, None
        self.tcts = 0
        self.regs = {}                                  # (col, row, offset) -> u32
        self.ops = []                                   # (byte offset, opcode) of every op, for --selftest
        self.tiles, self.counts = set(), {name: 0 for name in OPS.values()}
        self.dma_bytes, self.dma_cmds = {'load': {}, 'store': {}}, {'load': 0, 'store': 0}
        self.extent = {}                                # buffer -> smallest size that holds every DMA row
        self.kernels = {name: 0 for name, _ in KERNELS.values()}
        self.polls = {'registers': 0, 'data_words': 0, 'dma_registers': 0}

    def fail(self, what):
        where = 'header' if self.idx is None else \
            f'op {self.idx}{f" ({self.opname})" if self.opname else ""} at byte {self.off} (0x{self.off:x})'
        raise TxnError(f'{where}: {what}')

    def unpack(self, fmt, off):
        s = FMT[fmt]
        if off + s.size > len(self.data):
            self.fail(f'truncated: {s.size} bytes needed at byte {off}, the file has {len(self.data)}')
        return s.unpack_from(self.data, off)

    def expect(self, field, got, want):
        if got != want:
            self.fail(f'{field} is {got}, must be {want}')

    def tile(self, addr, what):
        col, row, offset = addr >> 25, (addr >> 20) & 31, addr & 0xFFFFF
        if col >= self.cols or row >= self.rows:
            self.fail(f'{what} 0x{addr:x}: tile (col {col}, row {row}) is outside the {self.cols}-column '
                      f'{self.rows}-row array')
        if row > 0:
            self.tiles.add((col, row))
        return col, row, offset

    def reg_name(self, row, offset):
        kind = 'shim' if row == 0 else 'mem' if row <= self.mem_rows else 'core'
        if kind != 'shim':                               # the counters win over what lies under them
            if offset == CORE_DONE and kind == 'core':
                return 'CORE_DONE'
            if offset in (LOAD_DONE, STORE_DONE):
                return 'DMA_LOAD_DONE' if offset == LOAD_DONE else 'DMA_STORE_DONE'
        if offset % 4:
            return None
        bd, nbd, words, ctrl, nch, mm2s, status, mm2s_status, lock, nlock = DMA_MAP[kind]
        if bd <= offset < bd + BD_STRIDE * nbd and (offset - bd) % BD_STRIDE < 4 * words:
            i, rel = divmod(offset - bd, BD_STRIDE)
            return f'BD[{i}].w{rel // 4}'
        for d, base, sbase in (('S2MM', ctrl, status), ('MM2S', ctrl + mm2s, status + mm2s_status)):
            if base <= offset < base + 8 * nch:
                ch, reg = divmod(offset - base, 8)
                return f'{d}{ch}_{"CTRL" if reg == 0 else "QUEUE"}'
            if sbase <= offset < sbase + 4 * nch:
                return f'{d}{(offset - sbase) // 4}_STATUS'
        if lock <= offset < lock + 0x10 * nlock and (offset - lock) % 0x10 == 0:
            return f'LOCK{(offset - lock) // 0x10}'
        return None

    def local_size(self, row):
        return 0 if row == 0 else MEM_LOCAL if row <= self.mem_rows else CORE_LOCAL

    def resolve(self, addr, what):
        """Return ((col, row, offset), register name or None for a data word); reject anything else."""
        col, row, offset = self.tile(addr, what)
        name = self.reg_name(row, offset)
        if name is None and (offset % 4 or offset + 4 > self.local_size(row)):
            self.fail(f'{what} 0x{addr:x}: offset 0x{offset:x} of tile ({col},{row}) is neither a register '
                      f'nor a 4-aligned word of its {self.local_size(row)}-byte data memory')
        return (col, row, offset), name

    def shim_bd(self, addr, what, word):
        key, name = self.resolve(addr, what)
        if key[1] != 0 or not name.endswith(f'.w{word}'):
            self.fail(f'{what} 0x{addr:x} is {name or "a data word"} of tile ({key[0]},{key[1]}), not word {word} '
                      'of a shim tile BD[i]')
        return key, name

    def bump(self, key):
        self.regs[key] = (self.regs.get(key, 0) + 1) & M32

    def parse(self):
        if len(self.data) < 16:
            self.fail(f'file is {len(self.data)} bytes, shorter than the 16-byte header')
        major, minor, gen, self.rows, self.cols, self.mem_rows, _pad, n_ops, total = self.unpack('hdr', 0)
        for field, got, want in (('major', major, 0), ('minor', minor, 1), ('total size', total, len(self.data))):
            self.expect(field, got, want)
        if gen not in (3, 4):                            # aie-rt's AIE2IPU (NPU1) and AIE2P (NPU2)
            self.fail(f'device generation {gen}, expected 3 (AIE2IPU) or 4 (AIE2P)')
        if self.cols < 1 or self.rows < 1 + self.mem_rows:
            self.fail(f'array of {self.rows} rows x {self.cols} cols with {self.mem_rows} mem-tile rows is '
                      'impossible (rows = 1 shim row + mem-tile rows + core rows)')
        if self.device and self.device != (self.rows, self.cols, self.mem_rows):
            self.fail(f'array rows,cols,mem rows = {self.rows},{self.cols},{self.mem_rows}, the device has '
                      f'{",".join(map(str, self.device))}')
        off = 16
        for self.idx in range(n_ops):
            self.off, self.opname = off, None
            if off >= total:
                self.fail(f'op count is {n_ops} but the ops end after {self.idx} ops at byte {off}')
            opcode = self.data[off]
            if opcode not in OPS:
                self.fail(f'unknown opcode {opcode}')
            self.opname = OPS[opcode]
            size = self.unpack('u32', off + SIZE_FIELD_AT[opcode])[0]
            if opcode == 1:
                if size < 16 or (size - 16) % 4:
                    self.fail(f'size is {size}, must be 16 + 4n')
            else:
                self.expect('size', size, FIXED_SIZE[opcode])
            if off + size > total:
                self.fail(f'op of {size} bytes runs past the end of the file ({total - off} bytes left)')
            getattr(self, 'op_' + self.opname.lower())(off, size)
            self.counts[self.opname] += 1
            self.ops.append((off, opcode))
            off += size
        if off != total:
            raise TxnError(f'byte {off} (0x{off:x}): {total - off} trailing bytes after the {n_ops} ops (op count)')
        return self.summary()

    def op_write(self, off, size):
        _, _, _, addr, value, _ = self.unpack('write', off)
        key, name = self.resolve(addr, 'RegOff')
        if name:
            self.regs[key] = value

    def op_blockwrite(self, off, size):
        addr = self.unpack('block', off)[3]
        self.resolve(addr, 'RegOff')                    # checked even when n = 0
        for k in range((size - 16) // 4):
            key, name = self.resolve(addr + 4 * k, f'RegOff + {4 * k}')
            if name:
                self.regs[key] = self.unpack('u32', off + 16 + 4 * k)[0]

    def op_maskwrite(self, off, size):
        _, _, _, addr, value, mask, _ = self.unpack('mask', off)
        key, name = self.resolve(addr, 'RegOff')
        if name:
            self.regs[key] = (self.regs.get(key, 0) & ~mask & M32) | (value & mask)

    def op_maskpoll(self, off, size):
        _, _, _, addr, value, mask, _ = self.unpack('mask', off)
        key, name = self.resolve(addr, 'RegOff')
        if name is None:
            self.polls['data_words'] += 1
            return
        if name not in COUNTERS:                        # DMA state: the emulator's to judge, not a replay's
            self.polls['dma_registers'] += 1
            return
        self.polls['registers'] += 1
        cur = self.regs.get(key, 0)
        if cur & mask != value:
            self.fail(f'MASKPOLL on {name} of tile ({key[0]},{key[1]}) never completes: register holds '
                      f'0x{cur:x}, (0x{cur:x} & mask 0x{mask:x}) = 0x{cur & mask:x} != value 0x{value:x}')

    def op_vnpu_kernel(self, off, size):
        tile, kernel = self.unpack('u32', off + 8)[0], self.unpack('u32', off + 12)[0]
        if tile & 0xFFFFF:
            self.fail(f'tile 0x{tile:x}: low 20 bits must be zero')
        col, row, _ = self.tile(tile, 'tile')
        if row <= self.mem_rows:
            self.fail(f'tile ({col},{row}) is not a core tile; only cores run the super-kernel')
        self.expect('kernel', kernel, 1)
        self.kernels['SUPER'] = self.kernels.get('SUPER', 0) + 1

    def op_tct(self, off, size):
        word, config = self.unpack('u32', off + 8)[0], self.unpack('u32', off + 12)[0]
        direction, row, col = word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF
        if direction > 1:
            self.fail(f'TCT direction {direction} is neither 0 (S2MM) nor 1 (MM2S)')
        if col >= self.cols or row >= self.rows:
            self.fail(f'TCT tile ({col},{row}) is outside the {self.cols}-column {self.rows}-row array')
        self.tcts += 1

    def op_ddr_patch(self, off, size):
        _, _, typ, size_in_bytes, action, regaddr, argidx, argplus = self.unpack('patch', off)
        for field, got, want in (('type', typ, 0), ('size_in_bytes', size_in_bytes, 40), ('action', action, 0)):
            self.expect(field, got, want)
        (col, row, offset), _ = self.shim_bd(regaddr, 'regaddr', 1)
        if argidx > 4:
            self.fail(f'argidx {argidx} is not a fused buffer (0..4)')
        if argplus >= DDR_SPAN or argplus % 4:
            self.fail(f'argplus 0x{argplus:x} is not a multiple of 4 below 2^40')
        ddr = ((argidx + 1) << 40) + argplus
        self.regs[(col, row, offset)] = ddr & M32
        high = (col, row, offset + 4)
        self.regs[high] = (self.regs.get(high, 0) & ~0xFFFF & M32) | (ddr >> 32)

    def op_vnpu_dma(self, off, size):
        _, _, bd, direction, local, row_bytes, rows, ddr_stride, local_stride, tile, skip = self.unpack('dma', off)
        (scol, srow, offset), name = self.shim_bd(bd, 'bd', 0)
        if tile & 0xFFFFF:
            self.fail(f'tile 0x{tile:x}: low 20 bits must be zero')
        col, row, _ = self.tile(tile, 'tile')
        if row == 0:
            self.fail(f'tile ({col},0) is a shim tile, which has no data memory')
        if skip > 3:
            self.fail(f'DDR byte offset {skip} is not 0..3')
        if direction not in (0, 1):
            self.fail(f'direction {direction} is neither 0 (load) nor 1 (store)')
        if rows < 1 or row_bytes < 1:
            self.fail(f'rows {rows} and row bytes {row_bytes} must both be >= 1')
        end = local + (rows - 1) * local_stride + row_bytes
        if end > self.local_size(row):
            self.fail(f'local rows end at byte {end}, past the {self.local_size(row)}-byte data memory of '
                      f'tile ({col},{row})')
        kind = ('load', 'store')[direction]
        if rows > 1 and (local_stride if direction == 0 else ddr_stride) < row_bytes:  # destination overlap
            self.fail(f'{kind} destination rows overlap: stride < row bytes {row_bytes}')
        word = lambda w: self.regs.get((scol, srow, offset + 4 * w), 0)
        ddr = (word(2) & 0xFFFF) << 32 | (word(1) & ~3 & M32)
        buf = (ddr >> 40) - 1
        if not 0 <= buf <= 4:
            self.fail(f'{name[:-3]} of shim tile ({scol},0) holds 0x{ddr:x}, not a fused-buffer address '
                      '(never patched?)')
        ddr += skip
        ddr_end = (ddr & (DDR_SPAN - 1)) + (rows - 1) * ddr_stride + row_bytes
        if ddr_end > DDR_SPAN:
            self.fail(f'DDR rows end at offset 0x{ddr_end:x} of buffer {buf}, past 2^40')
        if direction == 1 and buf in READ_ONLY:
            self.fail(f'store into read-only buffer {buf} ({BUFFERS[buf]}) through {name[:-3]} of shim tile ({scol},0)')
        moved, bname = self.dma_bytes[kind], BUFFERS[buf]
        moved[bname] = moved.get(bname, 0) + rows * row_bytes
        self.dma_cmds[kind] += 1
        self.extent[bname] = max(self.extent.get(bname, 0), ddr_end)
        self.bump((col, row, STORE_DONE if direction else LOAD_DONE))

    def op_vnpu_compute(self, off, size):
        _, _, tile, kernel, param, param_bytes = self.unpack('compute', off)
        if tile & 0xFFFFF:
            self.fail(f'tile 0x{tile:x}: low 20 bits must be zero')
        col, row, _ = self.tile(tile, 'tile')
        if row <= self.mem_rows:
            self.fail(f'tile ({col},{row}) is a memory tile; only core tiles compute')
        if kernel not in KERNELS:
            self.fail(f'unknown kernel {kernel} (1..6)')
        kname, block = KERNELS[kernel]
        self.expect(f'{kname} parameter block bytes', param_bytes, block)
        if param % 4 or param + block > CORE_LOCAL:
            self.fail(f'parameter block at 0x{param:x} is not a 4-aligned region of the core data memory')
        self.kernels[kname] += 1
        self.bump((col, row, CORE_DONE))

    def summary(self):
        core = sorted(t for t in self.tiles if t[1] > self.mem_rows)
        return {'bytes': len(self.data), 'rows': self.rows, 'cols': self.cols, 'mem_rows': self.mem_rows,
                'ops': len(self.ops), 'op_counts': self.counts, 'dma_commands': self.dma_cmds,
                'dma_bytes': self.dma_bytes, 'buffer_extent': self.extent, 'compute': self.kernels,
                'maskpoll': self.polls, 'memory_tiles': sorted(self.tiles - set(core)), 'core_tiles': core}


def check(data, device=None):
    """Parse one file's bytes; return (summary, reader) or raise TxnError."""
    reader = Reader(data, device)
    return reader.parse(), reader


def text_summary(path, s):
    nz = lambda d: ', '.join(f'{k} {v}' for k, v in d.items() if v) or 'none'
    tiles = lambda ts: ' '.join(f'{c},{r}' for c, r in ts) or '-'
    return '\n'.join([
        f'{path}: OK, {s["bytes"]} bytes, {s["ops"]} ops, array {s["cols"]} cols x {s["rows"]} rows '
        f'({s["mem_rows"]} mem-tile rows)',
        f'  ops:        {nz(s["op_counts"])}',
        f'  dma load:   {s["dma_commands"]["load"]} cmds, bytes {nz(s["dma_bytes"]["load"])}',
        f'  dma store:  {s["dma_commands"]["store"]} cmds, bytes {nz(s["dma_bytes"]["store"])}',
        f'  min buffer sizes: {nz(s["buffer_extent"])}',
        f'  compute:    {nz(s["compute"])}',
        f'  maskpoll:   {s["maskpoll"]["registers"]} on registers satisfied, '
        f'{s["maskpoll"]["data_words"]} on data words (data-dependent, not checked)',
        f'  tiles:      {len(s["memory_tiles"])} memory [{tiles(s["memory_tiles"])}], '
        f'{len(s["core_tiles"])} core [{tiles(s["core_tiles"])}]'])


def selftest(path):
    """Mutate a valid file; every mutation must be rejected with a TxnError, random damage must never crash."""
    data = open(path, 'rb').read()
    _, reader = check(data)                              # the unmutated file must be valid
    n_ops, first = len(reader.ops), {}
    for off, opcode in reader.ops:
        first.setdefault(opcode, off)
    get = lambda fmt, at, buf=data: struct.unpack_from(fmt, buf, at)[0]

    def put(buf, at, fmt, value, fix_total=False):
        b = bytearray(buf)
        struct.pack_into(fmt, b, at, value)
        return put(b, 12, '<I', len(b)) if fix_total else bytes(b)

    cases = []
    for n in sorted({0, 1, 15, 16, 17, 24, len(data) // 2, len(data) - 4, len(data) - 1}):
        cases += [(f'truncate to {n} bytes', data[:n])]
        cases += [(f'truncate to {n} bytes, total size fixed', put(data[:n], 12, '<I', n))] if n >= 16 else []
    cases.append(('4 trailing bytes, total size fixed', put(data + bytes(4), 12, '<I', len(data) + 4)))
    cases += [(f'opcode {bad}', put(data, 16, 'B', bad)) for bad in (2, 5, 10, 128, 130, 132, 255)]
    for opcode, at in sorted(first.items()):             # size fields
        old = get('<I', at + SIZE_FIELD_AT[opcode])
        for bad in ((old + 2, 8) if opcode == 1 else (old + 4, old - 4, 0)):
            cases.append((f'{OPS[opcode]} size {bad}', put(data, at + SIZE_FIELD_AT[opcode], '<I', bad)))
    fields = {None: [('major', 0, 'B', 1), ('minor', 1, 'B', 0), ('generation', 2, 'B', 0x41), ('rows', 3, 'B', 0),
                     ('cols', 4, 'B', 0), ('mem rows', 5, 'B', 255), ('op count', 8, '<I', n_ops + 1),
                     ('op count', 8, '<I', n_ops - 1), ('total size', 12, '<I', len(data) + 4),
                     ('total size', 12, '<I', len(data) - 1)],
              129: [('type', 8, '<i', 1), ('size_in_bytes', 12, '<I', 48), ('action', 16, '<I', 1),
                    ('argidx', 32, '<Q', 5), ('argidx', 32, '<Q', 1 << 32), ('argplus', 40, '<Q', DDR_SPAN),
                    ('regaddr', 24, '<Q', 0x1D000), ('regaddr', 24, '<Q', lambda v: v + 4),
                    ('regaddr', 24, '<Q', lambda v: v | 2 << 20), ('argplus', 40, '<Q', lambda v: v + 2)],
              144: [('direction', 12, '<I', 2), ('row bytes', 20, '<I', 0), ('rows', 24, '<I', 0),
                    ('tile', 36, '<I', 0), ('tile', 36, '<I', lambda v: v | 8), ('DDR byte offset', 40, '<I', 4),
                    ('local', 16, '<I', 1 << 31), ('bd', 8, '<I', lambda v: v + 4)],
              145: [('kernel', 12, '<I', 0), ('kernel', 12, '<I', 7), ('param bytes', 20, '<I', lambda v: v + 4),
                    ('param addr', 16, '<I', lambda v: v + 2), ('tile', 8, '<I', lambda v: v | 4),
                    ('tile', 8, '<I', 1 << 20), ('tile', 8, '<I', 0)]}
    for opcode, muts in fields.items():
        if opcode is None or opcode in first:
            at = first.get(opcode, 0)
            for label, rel, fmt, v in muts:
                v = v(get(fmt, at + rel)) if callable(v) else v
                cases.append((f'{OPS.get(opcode, "header")} {label} = {v:#x}', put(data, at + rel, fmt, v)))
    last_patch = {}                                      # re-point the patch feeding the first store
    for off, opcode in reader.ops:
        if opcode == 129:
            last_patch[get('<Q', off + 24)] = off
        elif opcode == 144 and get('<I', off + 12) == 1:
            if get('<I', off + 8) + 4 in last_patch:
                cases += [(f'store through a BD patched with argidx {a}',
                           put(data, last_patch[get('<I', off + 8) + 4] + 32, '<Q', a)) for a in READ_ONLY]
            break
    for off, opcode in reader.ops:                       # an unsatisfiable poll on a counter
        if opcode == 4 and reader.reg_name((get('<Q', off + 8) >> 20) & 31, get('<Q', off + 8) & 0xFFFFF) in COUNTERS:
            cases.append(('MASKPOLL value +1', put(data, off + 16, '<I', (get('<I', off + 16) + 1) & M32)))
            break
    # BLOCKWRITE and MASKWRITE never occur in bundlec's files: append hand-made ops (a core and a memory tile).
    core, mem = (reader.mem_rows + 1) << 20, 1 << 20
    W = lambda a, v: struct.pack('<BBB5xQII', 0, 0, 0, a, v, 24)
    BW = lambda a, ws, n=None: struct.pack(f'<BBB5xII{len(ws)}I', 1, 0, 0, a, n or 16 + 4 * len(ws), *ws)
    MASK = lambda op, a, v, m: struct.pack('<BBB5xQIII4x', op, 0, 0, a, v, m, 32)
    DMA = lambda bd, d: struct.pack('<B3xIIIIIIIIII', 144, 44, bd, d, 0, 4, 1, 4, 4, core, 0)
    bd15, done = BD_BASE + 15 * BD_STRIDE, core + STORE_DONE     # shim tile (0,0) BD 15
    good = [W(done, 7), BW(core, []), BW(bd15 + 4, [0x100, 2 << 8]), DMA(bd15, 1), MASK(4, done, 8, M32),
            MASK(3, done, 0x100, 0xF00), MASK(4, done, 0x108, 0xFFF), BW(core + 0xFFF8, [1, 2]),
            W(mem + CORE_DONE, 5)]
    append = lambda ops: put(data + b''.join(ops), 8, '<I', n_ops + len(ops), fix_total=True)
    bad = {'store counter not bumped by the DMA': {4: MASK(4, done, 7, M32)},
           'MASKWRITE ignored by the poll': {6: MASK(4, done, 8, 0xFFF)},
           'BLOCKWRITE BD to buffer 0, then a store': {2: BW(bd15 + 4, [0x100, 1 << 8])},
           'BLOCKWRITE n=0 at an unaligned word': {1: BW(core + 2, [])},
           'BLOCKWRITE size 17': {1: BW(core, [], 17)},
           'BLOCKWRITE running past data memory': {7: BW(core + 0xFFFC, [1, 2])},
           'WRITE to an unknown register': {0: W(core + 0x1DF08, 0)},
           'DMA through a BD holding 0': {2: BW(bd15 + 4, [0, 0])},
           'BLOCKWRITE past the shim channel registers': {1: BW(0x1D22C, [0, 0])},
           'WRITE to shim data memory': {0: W(0, 0)}}
    cases += [(f'appended ops, {label}', append([swap.get(i, op) for i, op in enumerate(good)]))
              for label, swap in bad.items()]
    rng = random.Random(0)
    for k in range(200):                                 # random damage: may be accepted, must never crash
        b = bytearray(data[:rng.choice([len(data), rng.randrange(len(data))])])
        for _ in range(rng.randint(1, 4) if b else 0):
            b[rng.randrange(min(len(b), 4096))] = rng.randrange(256)
        cases.append((f'fuzz {k}', bytes(b)))
    failures, valid = 0, ('fuzz', 'appended ops, valid')
    for label, mutated in [('appended ops, valid', append(good))] + cases:
        try:
            check(mutated)
            verdict, message = 'ok' if label.startswith(valid) else 'FAIL', 'accepted'
        except TxnError as e:
            verdict, message = 'ok' if label != valid[1] else 'FAIL', str(e)
        except Exception as e:                           # noqa: BLE001 - a crash is what this looks for
            verdict, message = 'FAIL', f'crashed: {type(e).__name__}: {e}'
        failures += verdict == 'FAIL'
        if not label.startswith('fuzz') or verdict == 'FAIL':
            print(f'{verdict:5} {label}: {message}')
    print(f'selftest {path}: {len(cases) + 1} cases, {failures} failed')
    return 1 if failures else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('files', nargs='+', metavar='FILE.txn')
    ap.add_argument('--quiet', action='store_true', help='print only errors')
    ap.add_argument('--json', action='store_true', help='print the summaries as JSON')
    ap.add_argument('--device', metavar='ROWS,COLS,MEMROWS', type=lambda v: tuple(int(x) for x in v.split(',')),
                    help='the array (rows, cols, mem-tile rows) the files must be built for')
    ap.add_argument('--selftest', action='store_true', help='mutate the (valid) FILE and check every rejection')
    args = ap.parse_args(argv)
    status, summaries = 0, {}
    for path in args.files:
        try:
            if args.selftest:
                status |= selftest(path)
                continue
            summaries[path], _ = check(open(path, 'rb').read(), args.device)
        except (OSError, TxnError) as e:
            print(f'{path}: {e}', file=sys.stderr)
            status = 1
        except Exception as e:                           # noqa: BLE001 - never a traceback
            print(f'{path}: reader bug: {type(e).__name__}: {e}', file=sys.stderr)
            status = 1
        else:
            if not args.quiet and not args.json:
                print(text_summary(path, summaries[path]))
    if args.json and not args.quiet:
        print(json.dumps(summaries, indent=1))
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
