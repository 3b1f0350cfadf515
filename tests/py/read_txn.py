#!/usr/bin/env python3
"""Independent reader and static checker for bundlec NPU transaction binaries (NAME.<segment>.txn).

Written from docs/npu-transaction-format.md alone (no bundlec source), to show that page suffices. For each file
it parses the header and every op and checks every rule the page states that needs no bound buffer or data moved
by a DMA: sizes, op count, trailing bytes, opcodes (144/145 are errors like any unknown one), fixed field values,
register addresses and tiles (the AIE-ML register map of shim, memory and core tiles; no virtual counters),
DDR_PATCH records, TCT fields, VNPU_KERNEL tiles and kernels. It replays the host's register and data-word writes
(everything starts at 0) and
- checks each MASKPOLL on a register only the host changes (BD words, channel control); polls on locks and
  channel status (which DMA and super-kernels change: a MASKPOLL of DONE after GO is normal), start queues and
  data words are only counted;
- runs the super-kernel statically: a host write leaving a resident core's GO lock (14) at v >= 1 starts v
  super-instructions with the mailbox (4 words at core offset 0xF0) as the host last wrote it, which must name a
  kernel 1..6, its block size, a 4-aligned block inside core memory and a reserved 0; these are the summary's
  computations. A core S2MM task that may reach the mailbox makes it data-dependent (counted, not checked);
- sums the DDR bytes of tasks pushed onto shim queues (BD length x runs over the NEXT_BD chain, the BDs as they
  read when pushed): loads (MM2S) and stores (S2MM) per fused buffer.
BDs, queues, locks and TCT tokens run in the emulator; reading the ops bundlec writes (WRITE, BLOCKWRITE, MASKWRITE,
MASKPOLL, TCT, DDR_PATCH, VNPU_KERNEL) in the v0.1 layout, it rejects aie-rt's other ops and the v1.0 layout.
Not checkable statically: bound buffer sizes, BD reach and store permission (read when a task starts), locks,
tokens, parameter blocks.

usage: read_txn.py [--quiet] [--json] [--device ROWS,COLS,MEMROWS] FILE.txn [...]
       read_txn.py --selftest FILE.txn   (mutates a valid file, cut to its first 3000 ops: every mutation must be
                                          rejected, the listed valid variants accepted, none may crash)
Exit status: 0 when every file is valid, 1 otherwise (message: file, op index, byte offset, what).
"""
import argparse
import json
import random
import struct
import sys

OPS = {0: 'WRITE', 1: 'BLOCKWRITE', 3: 'MASKWRITE', 4: 'MASKPOLL', 128: 'TCT', 129: 'DDR_PATCH', 146: 'VNPU_KERNEL'}
FIXED_SIZE = {0: (24,), 3: (32, 28), 4: (32, 28), 128: (16,), 129: (48,), 146: (16,)}  # MASK*: 28, no tail pad
SIZE_FIELD_AT = {0: 20, 1: 12, 3: 24, 4: 24, 128: 4, 129: 4, 146: 4}
# AIE-ML DMA registers per tile kind (format page, "Tiles and the register map"): BD base, BDs, words per BD,
# channel control base, channels per direction, MM2S control offset, status base, MM2S status offset, lock base,
# locks. The core's S2MM status is 0x1DF00 + 4n, its MM2S status 0x1DF10 + 4n.
DMA_MAP = {'shim': (0x1D000, 16, 8, 0x1D200, 2, 0x10, 0x1D220, 0x8, 0x14000, 16),
           'mem': (0xA0000, 48, 8, 0xA0600, 6, 0x30, 0xA0660, 0x20, 0xC0000, 64),
           'core': (0x1D000, 16, 6, 0x1DE00, 2, 0x10, 0x1DF00, 0x10, 0x1F000, 16)}
KERNELS = {1: ('CONV', 80), 2: ('GEMM', 36), 3: ('EPILOGUE', 52), 4: ('ELTWISE', 68), 5: ('POOL', 68),
           6: ('GAP', 24)}
BUFFERS = ('in', 'out', 'scratch', 'const', 'super_instr')
CORE_LOCAL, MEM_LOCAL = 64 * 1024, 512 * 1024          # vnpu local_memory_bytes / mem_tile_bytes
BD_STRIDE = 0x20
GO, DONE, MAILBOX = 14, 15, 0xF0                        # super-kernel: core locks, mailbox data offset (4 words)
GO_REG, DONE_REG = 0x1F000 + 0x10 * GO, 0x1F000 + 0x10 * DONE
M32, DDR_SPAN = 0xFFFFFFFF, 1 << 40
FMT = {k: struct.Struct(v) for k, v in {
    'hdr': '<BBBBBBHII', 'u32': '<I', 'write': '<BBB5xQII', 'block': '<BBB5xII', 'mask': '<BBB5xQIII',
    'patch': '<B3xIiII4xQQQ'}.items()}


class TxnError(Exception):
    """A rule of the format is broken; the message says where and what."""


class Reader:
    def __init__(self, data, device=None):
        self.data, self.device = data, device
        self.idx, self.off, self.opname = None, 0, None
        self.tcts = 0
        self.regs = {}                                  # (col, row, offset) -> u32, host-written registers
        self.mail, self.mail_at = {}, {}                # core (col, row) -> mailbox words (None: unknown), op
        self.resident = set()                           # cores that ran VNPU_KERNEL
        self.ops = []                                   # (byte offset, opcode) of every op, for --selftest
        self.tiles, self.counts = set(), {name: 0 for name in OPS.values()}
        self.dma_bytes, self.dma_tasks = {'load': {}, 'store': {}}, {'load': 0, 'store': 0}
        self.kernels = {name: 0 for name, _ in KERNELS.values()}
        self.kernels['mailbox data-dependent'] = 0
        self.polls = {'registers': 0, 'locks': 0, 'status': 0, 'queues': 0, 'data_words': 0}

    def fail(self, what):
        where = 'header' if self.idx is None else \
            f'op {self.idx}{f" ({self.opname})" if self.opname else ""} at byte {self.off} (0x{self.off:x})'
        raise TxnError(f'{where}: {what}')

    def unpack(self, fmt, off):
        s = FMT[fmt]
        if off + s.size > len(self.data):
            self.fail(f'truncated: {s.size} bytes needed at byte {off}, the file has {len(self.data)}')
        return s.unpack_from(self.data, off)

    def expect(self, field, got, *want):
        if got not in want:
            self.fail(f'{field} is {got}, must be {" or ".join(map(str, want))}')

    def tile(self, addr, what):
        col, row, offset = addr >> 25, (addr >> 20) & 31, addr & 0xFFFFF
        if col >= self.cols or row >= self.rows:
            self.fail(f'{what} 0x{addr:x}: tile (col {col}, row {row}) is outside the {self.cols}-column '
                      f'{self.rows}-row array')
        if row > 0:
            self.tiles.add((col, row))
        return col, row, offset

    def kind(self, row):
        return 'shim' if row == 0 else 'mem' if row <= self.mem_rows else 'core'

    def reg_name(self, row, offset):
        if offset % 4:
            return None
        bd, nbd, words, ctrl, nch, mm2s, status, mm2s_status, lock, nlock = DMA_MAP[self.kind(row)]
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
                self.fail(f'unknown opcode {opcode}' + (' (VNPU_DMA / VNPU_COMPUTE are gone)' if opcode in
                                                        (144, 145) else ''))
            self.opname = OPS[opcode]
            size = self.unpack('u32', off + SIZE_FIELD_AT[opcode])[0]
            if opcode == 1:
                if size < 16 or (size - 16) % 4:
                    self.fail(f'size is {size}, must be 16 + 4n')
            else:
                self.expect('size', size, *FIXED_SIZE[opcode])
            if off + size > total:
                self.fail(f'op of {size} bytes runs past the end of the file ({total - off} bytes left)')
            getattr(self, 'op_' + self.opname.lower())(off, size)
            self.counts[self.opname] += 1
            self.ops.append((off, opcode))
            off += size
        if off != total:
            raise TxnError(f'byte {off} (0x{off:x}): {total - off} trailing bytes after the {n_ops} ops (op count)')
        return self.summary()

    # The replay: what a host write does to the state a static reader can follow.
    def put(self, key, name, value, mask=M32):
        col, row, offset = key
        if name is None:                                 # a data word: only the mailbox is followed
            if self.kind(row) == 'core' and MAILBOX <= offset < MAILBOX + 16:
                box, i = self.mail.setdefault((col, row), [0] * 4), (offset - MAILBOX) // 4
                box[i] = None if box[i] is None and mask != M32 else ((box[i] or 0) & ~mask & M32) | (value & mask)
                self.mail_at[(col, row)] = self.idx
        elif name.endswith('_STATUS'):                   # read-only: the write is ignored
            pass
        elif name.endswith('_QUEUE'):                    # reads 0; the write pushes a task
            self.push(key, name, value & mask)
        else:
            self.regs[key] = (self.regs.get(key, 0) & ~mask & M32) | (value & mask)
            if offset == GO_REG and self.kind(row) == 'core' and (col, row) in self.resident:
                self.go(col, row)

    def bd_chain(self, col, row, first):
        """The BDs of a task (NEXT_BD while USE_NEXT_BD), each as its words read now."""
        base, nbd, words = DMA_MAP[self.kind(row)][:3]
        chain, bd = {}, first
        while bd not in chain and bd < nbd:
            chain[bd] = w = [self.regs.get((col, row, base + BD_STRIDE * bd + 4 * i), 0) for i in range(words)]
            if not w[-1] >> 26 & 1:                      # shim word 7 / core word 5: USE_NEXT_BD, NEXT_BD
                break
            bd = w[-1] >> 27 & 0xF
        return chain.values()

    def push(self, key, name, value):
        col, row, _ = key
        kind, s2mm = self.kind(row), name.startswith('S2MM')
        if kind == 'shim':                               # DDR bytes: BD length (words) x runs, per buffer
            direction, runs = ('store' if s2mm else 'load'), (value >> 16 & 0xFF) + 1
            self.dma_tasks[direction] += 1
            for w in self.bd_chain(col, row, value & 0xF):
                buf = ((w[2] & 0xFFFF) << 32 | (w[1] & ~3 & M32)) >> 40
                bname = BUFFERS[buf - 1] if 1 <= buf <= len(BUFFERS) else 'unbound'
                moved = self.dma_bytes[direction]
                moved[bname] = moved.get(bname, 0) + 4 * w[0] * runs
        elif kind == 'core' and s2mm:                    # a load into core memory: may it reach the mailbox?
            for w in self.bd_chain(col, row, value & 0xF):
                start, n = (w[0] >> 14 & 0x3FFF) * 4, w[0] & 0x3FFF
                step = max(w[2] & 0x1FFF, w[2] >> 13 & 0x1FFF, w[3] & 0x1FFF) + 1
                end = start + 4 * ((n - 1) * step + (w[4] >> 13 & 0x3F) * ((w[4] & 0x1FFF) + 1) + 1)
                if n and start < MAILBOX + 16 and end > MAILBOX:
                    self.mail[(col, row)] = [None] * 4

    def go(self, col, row):
        """GO (lock 14) released on a resident core: the super-kernel takes it while it can, one
        super-instruction each, on the mailbox as the host wrote it."""
        key = (col, row, GO_REG)
        runs, self.regs[key] = self.regs[key] & 0x3F, 0
        box = self.mail.get((col, row), [0] * 4)
        if not runs or None in box:
            self.kernels['mailbox data-dependent'] += runs
            return
        at = self.mail_at.get((col, row))
        where = f'GO on core ({col},{row}): its mailbox (' + ('never written)' if at is None else f'op {at})')
        kernel, addr, size, reserved = box
        if kernel not in KERNELS:
            self.fail(f'{where} names kernel {kernel}, not 1..6')
        kname, block = KERNELS[kernel]
        if reserved:
            self.fail(f'{where} has reserved word 3 = 0x{reserved:x}, must be 0')
        if size != block:
            self.fail(f'{where} gives {kname} a {size}-byte block, its parameter block is {block} bytes')
        if addr % 4 or addr + block > self.local_size(row):
            self.fail(f'{where} puts the {kname} block at 0x{addr:x}, not a 4-aligned region of the '
                      f'{self.local_size(row)}-byte data memory')
        self.kernels[kname] += runs

    def op_write(self, off, size):
        _, _, _, addr, value, _ = self.unpack('write', off)
        self.put(*self.resolve(addr, 'RegOff'), value)

    def op_blockwrite(self, off, size):
        addr = self.unpack('block', off)[3]
        self.resolve(addr, 'RegOff')                    # checked even when n = 0
        for k in range((size - 16) // 4):
            self.put(*self.resolve(addr + 4 * k, f'RegOff + {4 * k}'), self.unpack('u32', off + 16 + 4 * k)[0])

    def op_maskwrite(self, off, size):
        _, _, _, addr, value, mask, _ = self.unpack('mask', off)
        self.put(*self.resolve(addr, 'RegOff'), value, mask)

    def op_maskpoll(self, off, size):
        _, _, _, addr, value, mask, _ = self.unpack('mask', off)
        key, name = self.resolve(addr, 'RegOff')
        kind = 'data_words' if name is None else 'locks' if name.startswith('LOCK') else \
            'status' if name.endswith('_STATUS') else 'queues' if name.endswith('_QUEUE') else 'registers'
        self.polls[kind] += 1
        if kind != 'registers':                          # data, DMA or super-kernel state: the emulator's
            return
        cur = self.regs.get(key, 0)                      # BD words and channel control: only the host writes
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
        self.resident.add((col, row))
        if self.regs.get((col, row, GO_REG), 0) & 0x3F:  # GO already released: it runs now
            self.go(col, row)

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
        for field, got, want in (('type', typ, (0,)), ('size_in_bytes', size_in_bytes, (40, 0)),
                                 ('action', action, (0,))):
            self.expect(field, got, *want)
        (col, row, offset), _ = self.shim_bd(regaddr, 'regaddr', 1)
        if argidx > 4:
            self.fail(f'argidx {argidx} is not a fused buffer (0..4)')
        if argplus >= DDR_SPAN or argplus % 4:
            self.fail(f'argplus 0x{argplus:x} is not a multiple of 4 below 2^40')
        ddr = ((argidx + 1) << 40) + argplus
        self.regs[(col, row, offset)] = ddr & M32
        high = (col, row, offset + 4)
        self.regs[high] = (self.regs.get(high, 0) & ~0xFFFF & M32) | (ddr >> 32)

    def summary(self):
        core = sorted(t for t in self.tiles if t[1] > self.mem_rows)
        return {'bytes': len(self.data), 'rows': self.rows, 'cols': self.cols, 'mem_rows': self.mem_rows,
                'ops': len(self.ops), 'op_counts': self.counts, 'dma_tasks': self.dma_tasks,
                'dma_bytes': self.dma_bytes, 'compute': self.kernels, 'maskpoll': self.polls,
                'memory_tiles': sorted(self.tiles - set(core)), 'core_tiles': core}


def check(data, device=None):
    """Parse one file's bytes; return (summary, reader) or raise TxnError."""
    reader = Reader(data, device)
    return reader.parse(), reader


def text_summary(path, s):
    nz = lambda d: ', '.join(f'{k} {v}' for k, v in d.items() if v) or 'none'
    tiles = lambda ts: ' '.join(f'{c},{r}' for c, r in ts) or '-'
    p = s['maskpoll']
    return '\n'.join([
        f'{path}: OK, {s["bytes"]} bytes, {s["ops"]} ops, array {s["cols"]} cols x {s["rows"]} rows '
        f'({s["mem_rows"]} mem-tile rows)',
        f'  ops:        {nz(s["op_counts"])}',
        f'  dma load:   {s["dma_tasks"]["load"]} shim tasks, bytes {nz(s["dma_bytes"]["load"])}',
        f'  dma store:  {s["dma_tasks"]["store"]} shim tasks, bytes {nz(s["dma_bytes"]["store"])}',
        f'  compute:    {nz(s["compute"])}',
        f'  maskpoll:   {p["registers"]} on host-written registers satisfied; not checked (DMA, super-kernel, '
        f'data): {nz({k: v for k, v in p.items() if k != "registers"})}',
        f'  tiles:      {len(s["memory_tiles"])} memory [{tiles(s["memory_tiles"])}], '
        f'{len(s["core_tiles"])} core [{tiles(s["core_tiles"])}]'])


def selftest(path, max_ops=3000):
    """Mutate a valid file; every mutation must be rejected with a TxnError, random damage must never crash."""
    data = open(path, 'rb').read()
    _, reader = check(data)                              # the unmutated file must be valid
    get = lambda fmt, at, buf=data: struct.unpack_from(fmt, buf, at)[0]

    def put(buf, at, fmt, value, fix_total=False):
        b = bytearray(buf)
        struct.pack_into(fmt, b, at, value)
        return put(b, 12, '<I', len(b)) if fix_total else bytes(b)

    is_mailbox = lambda off, opcode: opcode == 1 and get('<I', off + 12) == 32 and get('<I', off + 8) & 0xFFFFF \
        == MAILBOX and (get('<I', off + 8) >> 20 & 31) > reader.mem_rows
    first, mailbox = {}, None
    for i, (off, opcode) in enumerate(reader.ops):
        first.setdefault(opcode, i)
        mailbox = i if mailbox is None and is_mailbox(off, opcode) else mailbox
    keep = max([max_ops, (mailbox or 0) + 8] + [i + 1 for i in first.values()])
    if len(reader.ops) > keep:                           # a prefix of whole ops is a valid file too, and fast
        data = put(put(data[:reader.ops[keep][0]], 8, '<I', keep), 12, '<I', reader.ops[keep][0])
        _, reader = check(data)
    n_ops, first = len(reader.ops), {opcode: reader.ops[i][0] for opcode, i in first.items()}

    cases = []                                           # (label, bytes, must be accepted)
    for n in sorted({0, 1, 15, 16, 17, 24, len(data) // 2, len(data) - 4, len(data) - 1}):
        cases += [(f'truncate to {n} bytes', data[:n], False)]
        cases += [(f'truncate to {n} bytes, total size fixed', put(data[:n], 12, '<I', n), False)] if n >= 16 else []
    cases.append(('4 trailing bytes, total size fixed', put(data + bytes(4), 12, '<I', len(data) + 4), False))
    cases += [(f'opcode {bad}', put(data, 16, 'B', bad), False) for bad in (2, 5, 10, 128, 130, 132, 144, 145, 255)]
    for opcode, at in sorted(first.items()):             # size fields
        old = get('<I', at + SIZE_FIELD_AT[opcode])
        for bad in ((old + 2, 8) if opcode == 1 else (old + 4, 24, 0) if opcode in (3, 4) else (old + 4, old - 4, 0)):
            cases.append((f'{OPS[opcode]} size {bad}', put(data, at + SIZE_FIELD_AT[opcode], '<I', bad), False))
    fields = {None: [('major', 0, 'B', 1), ('minor', 1, 'B', 0), ('generation', 2, 'B', 0x41), ('rows', 3, 'B', 0),
                     ('cols', 4, 'B', 0), ('mem rows', 5, 'B', 255), ('op count', 8, '<I', n_ops + 1),
                     ('op count', 8, '<I', n_ops - 1), ('total size', 12, '<I', len(data) + 4),
                     ('total size', 12, '<I', len(data) - 1)],
              129: [('type', 8, '<i', 1), ('size_in_bytes', 12, '<I', 48), ('action', 16, '<I', 1),
                    ('argidx', 32, '<Q', 5), ('argidx', 32, '<Q', 1 << 32), ('argplus', 40, '<Q', DDR_SPAN),
                    ('regaddr', 24, '<Q', 0x1D000), ('regaddr', 24, '<Q', lambda v: v + 4),
                    ('regaddr', 24, '<Q', lambda v: v | 2 << 20), ('argplus', 40, '<Q', lambda v: v + 2)],
              146: [('kernel', 12, '<I', 0), ('kernel', 12, '<I', 2), ('tile', 8, '<I', lambda v: v | 4),
                    ('tile', 8, '<I', lambda v: v | 1 << 19), ('tile (memory tile)', 8, '<I', 1 << 20),
                    ('tile (shim)', 8, '<I', 0), ('tile (outside)', 8, '<I', 31 << 20)],
              'mailbox': [('kernel', 16, '<I', 0), ('kernel', 16, '<I', 7), ('block bytes', 24, '<I', lambda v: v + 4),
                          ('block bytes', 24, '<I', 0), ('block address', 20, '<I', lambda v: v + 2),
                          ('block address', 20, '<I', 0xFFF0), ('reserved word', 28, '<I', 1)]}
    if mailbox is not None:
        first['mailbox'] = reader.ops[mailbox][0]
    for opcode, muts in fields.items():
        if opcode is None or opcode in first:
            at = first.get(opcode, 0)
            for label, rel, fmt, v in muts:
                v = v(get(fmt, at + rel)) if callable(v) else v
                cases.append((f'{OPS.get(opcode, opcode or "header")} {label} = {v:#x}', put(data, at + rel, fmt, v),
                              False))
    if 129 in first:
        cases.append(('DDR_PATCH size_in_bytes = 0 (aie-rt\'s)', put(data, first[129] + 12, '<I', 0), True))
    # MASKWRITE, MASKPOLL on registers and most register kinds never occur in bundlec's files: append hand-made
    # ops on the first core tile (col 0) and the memory tile below it.
    core, mem = (reader.mem_rows + 1) << 20, 1 << 20
    cbd = core + DMA_MAP['core'][0] + 15 * BD_STRIDE     # core BD 15
    W = lambda a, v: struct.pack('<BBB5xQII', 0, 0, 0, a, v, 24)
    BW = lambda a, ws, n=None: struct.pack(f'<BBB5xII{len(ws)}I', 1, 0, 0, a, n or 16 + 4 * len(ws), *ws)
    MASK = lambda op, a, v, m: struct.pack('<BBB5xQIII4x', op, 0, 0, a, v, m, 32)
    K = lambda tile, kernel=1: struct.pack('<B3xIII', 146, 16, tile, kernel)
    MB = lambda kernel=2, addr=0x200, size=36, res=0: BW(core + MAILBOX, [kernel, addr, size, res])
    good = [W(core + 0x100, 7),                          # 0 a core data word
            BW(core, []),                                # 1 n = 0
            BW(cbd, [0x40 << 14 | 4, 0, 0, 0, 0, 1 << 25]),   # 2 a valid core BD (4 words at 0x100)
            MASK(3, cbd + 4, 0x8, 0xF),                  # 3 MASKWRITE of a BD word
            MASK(4, cbd + 4, 0x8, M32),                  # 4 MASKPOLL on it: the replay knows it holds
            MASK(4, core + 0x100, 7, M32),               # 5 on a data word: counted
            W(core + 0x1DF00, 5),                        # 6 a write to S2MM0 status: read-only, ignored
            MASK(4, core + 0x1DF04, 0, M32),             # 7 a poll on S2MM1 status: counted
            K(core),                                     # 8 VNPU_KERNEL
            MB(),                                        # 9 the mailbox: GEMM, block at 0x200
            W(core + DMA_MAP['core'][3] + 4, 15),        # 10 BD 15 onto core S2MM 0: it does not reach the mailbox
            W(core + GO_REG, 1),                         # 11 GO
            MASK(4, core + DONE_REG, 1, 0x3F),           # 12 DONE: counted
            W(core + DONE_REG, 0),                       # 13
            BW(core + 0xFFF8, [1, 2]),                   # 14 the end of core data memory
            W(mem + 0x32000, 5), W(mem + 0x1DF00, 5),    # 15, 16 data words of a memory tile
            BW(0x1D228, [0, 0])]                         # 17 shim MM2S status 0, 1 (ignored)
    append = lambda ops: put(data + b''.join(ops), 8, '<I', n_ops + len(ops), fix_total=True)
    accept = {'valid': {},
              'MASKPOLL of 28 bytes': {5: MASK(4, core + 0x100, 7, M32)[:24] + struct.pack('<I', 28)},
              'bad mailbox, GO 0': {9: MB(7), 11: W(core + GO_REG, 0)},
              'bad mailbox a core S2MM task may overwrite': {2: BW(cbd, [0x3C << 14 | 8, 0, 0, 0, 0, 1 << 25]),
                                                             9: MB(7)}}
    reject = {'WRITE to 0x32000 of a core tile': {0: W(core + 0x32000, 0)},
              'WRITE to 0x1DF08 of a core tile': {0: W(core + 0x1DF08, 0)},
              'WRITE to shim data memory': {0: W(0, 0)},
              'BLOCKWRITE size 17': {1: BW(core, [], 17)},
              'BLOCKWRITE n=0 at an unaligned word': {1: BW(core + 2, [])},
              'BLOCKWRITE running past data memory': {14: BW(core + 0xFFFC, [1, 2])},
              'BLOCKWRITE past the shim channel registers': {17: BW(0x1D22C, [0, 0])},
              'MASKWRITE the poll does not see': {3: MASK(3, cbd + 4, 0x9, 0xF)},
              'MASKPOLL on a BD word that cannot hold': {4: MASK(4, cbd + 4, 0x9, M32)},
              'MASKPOLL value outside its mask': {4: MASK(4, cbd + 4, 0x108, 0xFF)},
              'VNPU_KERNEL kernel 2': {8: K(core, 2)},
              'VNPU_KERNEL on a memory tile': {8: K(mem)},
              'VNPU_KERNEL on a shim tile': {8: K(0)},
              'VNPU_KERNEL tile with low bits': {8: K(core | MAILBOX)},
              'mailbox kernel 0': {9: MB(0)}, 'mailbox kernel 7': {9: MB(7)},
              'mailbox block bytes 40': {9: MB(size=40)}, 'mailbox block address 0x202': {9: MB(addr=0x202)},
              'mailbox block past data memory': {9: MB(addr=0xFFE0)}, 'mailbox reserved 1': {9: MB(res=1)},
              'mailbox kernel cleared by a MASKWRITE': {10: MASK(3, core + MAILBOX, 0, 0xFF)},
              'GO released by a MASKWRITE on a bad mailbox': {9: MB(size=0), 11: MASK(3, core + GO_REG, 1, 0x3F)},
              'opcode 144 (VNPU_DMA)': {8: struct.pack('<B3xI9I', 144, 44, *[0] * 9)},
              'opcode 145 (VNPU_COMPUTE)': {8: struct.pack('<B3xI4I', 145, 24, 0, 0, 0, 0)}}
    for verdict, variants in ((True, accept), (False, reject)):
        cases += [(f'appended ops, {label}', append([swap.get(i, op) for i, op in enumerate(good)]), verdict)
                  for label, swap in variants.items()]
    rng = random.Random(0)
    for k in range(200):                                 # random damage: may be accepted, must never crash
        b = bytearray(data[:rng.choice([len(data), rng.randrange(len(data))])])
        for _ in range(rng.randint(1, 4) if b else 0):
            b[rng.randrange(min(len(b), 4096))] = rng.randrange(256)
        cases.append((f'fuzz {k}', bytes(b), None))
    failures = 0
    for label, mutated, must_accept in cases:
        try:
            check(mutated)
            verdict, message = 'FAIL' if must_accept is False else 'ok', 'accepted'
        except TxnError as e:
            verdict, message = 'FAIL' if must_accept else 'ok', str(e)
        except Exception as e:                           # noqa: BLE001 - a crash is what this looks for
            verdict, message = 'FAIL', f'crashed: {type(e).__name__}: {e}'
        failures += verdict == 'FAIL'
        if must_accept is not None or verdict == 'FAIL':
            print(f'{verdict:5} {label}: {message}')
    print(f'selftest {path}: {len(cases)} cases ({n_ops} ops of the file), {failures} failed')
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
