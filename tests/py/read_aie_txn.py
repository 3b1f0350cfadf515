#!/usr/bin/env python3
"""Independent reader and checker for AMD aie-rt transaction ("TXN") binaries.

Written only from public sources, without looking at this project's own
encoder, decoder or format notes:
  * Xilinx/aie-rt  driver/src/global/xaiegbl.h      (XAie_TxnHeader, op headers,
                   *_opt structs, patch_op_t, tct_op_t; branch release/main_aig)
  * Xilinx/aie-rt  driver/src/common/xaie_txn.h     (XAie_TxnOpcode numbers)
  * Xilinx/aie-rt  driver/src/common/xaie_helper.c  (how records are serialised:
                   versions 0.1 / 1.0, Size fields, NumOps, 4-aligned TxnSize)
  * Xilinx/aie-rt  driver/src/global/xaiegbl_defs.h (XAIE_DEV_GEN_* numbers)
  * Xilinx/aie-rt  driver/src/global/xaiemlgbl_params.h and xaie2pgbl_params.h
                   (AIE-ML / AIE2P register offsets, BD and queue fields), xaiemlgbl_reginit.c
                   (memory sizes, lock counts), driver/src/dma/xaie_dma*.c (BD encoding)
  * Xilinx/mlir-aie lib/Targets/AIETargetNPU.cpp (TXN writer, v0.1 and the older 1.0 writer),
                   AIETargetModel.cpp (mem-tile neighbour windows, BD/channel parity) and
                   tests under test/Targets/NPU/ (expected words; npu_blockwrite_instgen.mlir)
  * nod-ai/iree-amd-aie runtime/src/iree-amd-aie/aie_runtime/test/test_transaction.cc
                   (aie-rt's own serialisation of a small transaction, as decoded fields)
  * docs/aie-ml-facts.md (this project's table of the public facts above, with sources)

--check: DevGen 3/4; 4-aligned addresses inside the header's array; block writes within a
tile; DDR_PATCH only onto shim BD word 1 with 4-aligned argplus; TCT tiles in the array. It
tracks WRITE/BLOCKWRITE/MASKWRITE per tile (DDR_PATCH does not program a BD) and decodes every
programmed BD at each queue push naming it and at the end: VALID BDs need BUFFER_LENGTH > 0,
NEXT_BD (if used) and used lock IDs in range (shim/core 16; mem 192, west/east ranges only
where that neighbour exists), and mem/core BDs' base + D0..D3 reach inside the DMA window
(core 64 KiB; mem 0x180000 bytes, less the west or east 0x80000 at an array edge). Pushes need
START_BD_ID < #BDs, a VALID BD if this transaction wrote it, and mem BD 0-23/24-47 on
even/odd channels.

Usage:  read_aie_txn.py [--check] [--quiet] [--dump] FILE.txn ...
        read_aie_txn.py --selftest
"""
import struct
import sys
from collections import Counter


class TxnError(Exception):
    """The bytes are not a well-formed TXN container."""


# --- Header. Xilinx/aie-rt driver/src/global/xaiegbl.h (XAie_TxnHeader):
# u8 Major, Minor, DevGen, NumRows, NumCols, NumMemTileRows; u16 pad; u32 NumOps;
# u32 TxnSize (bytes incl. header, rounded up to 4: aie-rt driver/src/common/xaie_helper.c).
HEADER = struct.Struct('<6BHII')
VERSIONS = {(0, 1): 'v0.1', (1, 0): 'v1.0'}  # xaie_helper.c: *_Major/Minor and *_opt
# aie-rt driver/src/global/xaiegbl_defs.h
DEV_GEN = {0: 'GENERIC', 1: 'AIE', 2: 'AIEML', 3: 'AIE2IPU', 4: 'AIE2P', 6: 'S100',
           7: 'S200', 8: 'AIE2P_STRIX_A0', 9: 'AIE2P_STRIX_B0'}

# --- Opcodes. Xilinx/aie-rt driver/src/common/xaie_txn.h (XAie_TxnOpcode). Values
# 9..15 differ between aie-rt releases (LOAD_PM_START.. vs CONFIG_SHIMDMA_BD..)
# and have no published record layout here, so they are rejected.
OPCODES = {0: 'WRITE', 1: 'BLOCKWRITE', 2: 'BLOCKSET', 3: 'MASKWRITE', 4: 'MASKPOLL',
           5: 'NOOP', 6: 'PREEMPT', 7: 'MASKPOLL_BUSY', 8: 'LOADPDI',
           128: 'TCT', 129: 'DDR_PATCH', 130: 'READ_REGS', 131: 'RECORD_TIMER',
           132: 'MERGE_SYNC'}
CUSTOM_BEGIN = 128
ADDR_OPS = ('WRITE', 'BLOCKWRITE', 'MASKWRITE', 'MASKPOLL', 'MASKPOLL_BUSY')

# --- Record layouts (little-endian, natural C alignment), aie-rt xaiegbl.h.
# v0.1: XAie_OpHdr {u8 Op, Col, Row}; Write32Hdr: RegOff u64 @8, Value @16, Size @20
# (24 bytes). MaskWrite32Hdr / MaskPoll32Hdr: RegOff u64 @8, Value @16, Mask @20,
# Size @24: aie-rt writes Size=sizeof=32, mlir-aie AIETargetNPU.cpp writes 28.
# BlockWrite32Hdr: OpHdr, u8 Col @3, Row @4, RegOff u32 @8, Size @12, payload.
# NoOpHdr / PreemptHdr {Op, level, u16}: 4 bytes. LoadPdiHdr {Op, pad, u16 PdiId,
# u32 PdiSize, u64 PdiAddress}: 16. CustomOpHdr {OpHdr, u32 Size @4}, payload.
W01 = struct.Struct('<3B5xQII')
M01 = struct.Struct('<3B5xQIII')
B01 = struct.Struct('<3B2B3xII')
# v1.0 ("_opt"): XAie_OpHdr_opt {u8 Op, pad[3]}; Write32Hdr_opt RegOff u32, Value
# (12 bytes); MaskWrite/MaskPoll32Hdr_opt + Mask (16); BlockWrite32Hdr_opt RegOff,
# Size (12 + payload); CustomOpHdr_opt {Op, pad[3], Size} (8 + payload).
W10 = struct.Struct('<B3xII')
M10 = struct.Struct('<B3xIII')
B10 = struct.Struct('<B3xII')
NOOP = struct.Struct('<B3x')
PREEMPT = struct.Struct('<BBH')
LOADPDI = struct.Struct('<BBHIQ')
CUSTOM = struct.Struct('<B3xI')
# Custom payloads. tct_op_t {u32 word, u32 config}; field packing per mlir-aie
# AIETargetNPU.cpp appendSync: word = dir | row<<8 | col<<16,
# config = row_num<<8 | col_num<<16 | channel<<24.
TCT = struct.Struct('<II')
# patch_op_t {op_base{u32 type, u32 size_in_bytes}, u32 action, (pad), u64 regaddr,
# u64 argidx, u64 argplus} = 40 bytes; patch_op_opt_t {u32 regaddr, u8 argidx,
# pad[3], u64 argplus} = 16 bytes.  (aie-rt xaiegbl.h)
PATCH01 = struct.Struct('<IIIIQQQ')
PATCH10 = struct.Struct('<IB3xQ')
PATCHBD_OP = 4  # e_PATCHBD_OP in aie-rt's OP_LIST (xaiegbl.h); producers write 0


def _u32s(b):
    return list(struct.unpack_from('<%dI' % (len(b) // 4), b))


def _decode_custom(op, payload, opt, where):
    name = op['name']
    if name == 'TCT':
        if len(payload) != TCT.size:
            raise TxnError('%s: TCT payload is %d bytes, expected 8' % (where, len(payload)))
        word, cfg = TCT.unpack(payload)
        op.update(direction=word & 0xFF, row=(word >> 8) & 0xFF, col=(word >> 16) & 0xFF,
                  row_num=(cfg >> 8) & 0xFF, col_num=(cfg >> 16) & 0xFF, channel=cfg >> 24,
                  tct_word=word, tct_config=cfg)
    elif name == 'DDR_PATCH':
        want = PATCH10 if opt else PATCH01
        if len(payload) != want.size:
            raise TxnError('%s: DDR_PATCH payload is %d bytes, expected %d'
                           % (where, len(payload), want.size))
        if opt:
            op['regaddr'], op['argidx'], op['argplus'] = want.unpack(payload)
        else:
            typ, sib, action, _pad, regaddr, argidx, argplus = want.unpack(payload)
            if sib not in (0, PATCH01.size):
                raise TxnError('%s: DDR_PATCH size_in_bytes=%d (expected 0 or 40)' % (where, sib))
            if typ not in (0, PATCHBD_OP):
                raise TxnError('%s: DDR_PATCH op_base.type=%d (expected 0 or %d)'
                               % (where, typ, PATCHBD_OP))
            op.update(op_type=typ, size_in_bytes=sib, action=action, regaddr=regaddr,
                      argidx=argidx, argplus=argplus)
    elif name == 'READ_REGS' and len(payload) >= 4:
        op['count'] = struct.unpack_from('<I', payload)[0]
        op['words'] = _u32s(payload[4:])
    elif name == 'RECORD_TIMER' and len(payload) >= 4:
        op['id'] = struct.unpack_from('<I', payload)[0]
    else:  # MERGE_SYNC and private custom ops: skipped by their declared size
        op['raw'] = bytes(payload)


def _decode_op(data, off, end, idx, opt):
    code = data[off]
    name = OPCODES.get(code, 'CUSTOM_%d' % code if code >= CUSTOM_BEGIN else None)
    where = 'op %d (%s) at byte %d' % (idx, name or 'opcode %d' % code, off)
    if name is None:
        raise TxnError('%s: unknown opcode %d' % (where, code))

    def need(n):
        if off + n > end:
            raise TxnError('%s: record needs %d bytes, only %d left' % (where, n, end - off))

    def sized(size, lo, step, exact=None):
        if (exact is not None and size not in exact) or size < lo or (size - lo) % step:
            raise TxnError('%s: bad size field %d' % (where, size))
        need(size)
        return size

    op = {'index': idx, 'offset': off, 'opcode': code, 'name': name}
    if name == 'WRITE':
        if opt:
            need(W10.size)
            _, op['addr'], op['value'] = W10.unpack_from(data, off)
            op['size'] = W10.size
        else:
            need(W01.size)
            _, op['hdr_col'], op['hdr_row'], op['addr'], op['value'], size = \
                W01.unpack_from(data, off)
            op['size'] = sized(size, 24, 4, exact=(24,))
    elif name in ('MASKWRITE', 'MASKPOLL', 'MASKPOLL_BUSY'):
        if opt:
            need(M10.size)
            _, op['addr'], op['value'], op['mask'] = M10.unpack_from(data, off)
            op['size'] = M10.size
        else:
            need(M01.size)
            _, op['hdr_col'], op['hdr_row'], op['addr'], op['value'], op['mask'], size = \
                M01.unpack_from(data, off)
            op['size'] = sized(size, 28, 4, exact=(28, 32))
    elif name == 'BLOCKWRITE':
        st = B10 if opt else B01
        need(st.size)
        if opt:
            _, op['addr'], size = st.unpack_from(data, off)
        else:
            _, op['hdr_col'], op['hdr_row'], _c, _r, op['addr'], size = st.unpack_from(data, off)
        op['size'] = sized(size, st.size, 4)
        op['data'] = _u32s(data[off + st.size:off + size])
    elif name == 'BLOCKSET':
        raise TxnError('%s: BLOCKSET has no serialised layout (aie-rt emits BLOCKWRITE)' % where)
    elif name == 'NOOP':
        need(NOOP.size)
        op['size'] = NOOP.size
    elif name == 'PREEMPT':
        need(PREEMPT.size)
        _, op['level'], op['reserved'] = PREEMPT.unpack_from(data, off)
        op['size'] = PREEMPT.size
    elif name == 'LOADPDI':
        need(LOADPDI.size)
        _, _p, op['pdi_id'], op['pdi_size'], op['pdi_address'] = LOADPDI.unpack_from(data, off)
        op['size'] = LOADPDI.size
    else:  # custom op (>= 128): XAie_CustomOpHdr(_opt)
        need(CUSTOM.size)
        op['size'] = sized(CUSTOM.unpack_from(data, off)[1], CUSTOM.size, 1)
        _decode_custom(op, data[off + CUSTOM.size:off + op['size']], opt, where)
    return op


def decode(data):
    """Decode a TXN container: returns (header dict, list of op dicts)."""
    data = bytes(data)
    if len(data) < HEADER.size:
        raise TxnError('truncated: %d bytes, the header alone is 16' % len(data))
    f = HEADER.unpack_from(data)
    hdr = dict(zip(('major', 'minor', 'dev_gen', 'num_rows', 'num_cols', 'num_mem_tile_rows',
                    'padding', 'num_ops', 'txn_size'), f))
    ver = VERSIONS.get((hdr['major'], hdr['minor']))
    if ver is None:
        raise TxnError('unsupported TXN version %d.%d' % (hdr['major'], hdr['minor']))
    hdr['version'] = ver
    size = hdr['txn_size']
    if size != len(data):
        raise TxnError('header TxnSize=%d disagrees with the %d bytes given' % (size, len(data)))
    ops, off = [], HEADER.size
    for i in range(hdr['num_ops']):
        if off >= size:
            raise TxnError('op %d at byte %d: data ends, but header NumOps=%d'
                           % (i, off, hdr['num_ops']))
        op = _decode_op(data, off, size, i, ver == 'v1.0')
        ops.append(op)
        off += op['size']
    tail = data[off:]
    if tail and (off % 4 == 0 or off + len(tail) != (off + 3) // 4 * 4 or any(tail)):
        raise TxnError('%d bytes left at byte %d after the %d ops of header NumOps'
                       % (len(tail), off, hdr['num_ops']))
    return hdr, ops


# --- AIE-ML addressing: Xilinx/aie-rt xaiemlgbl_params.h users (XAIE2IPU_COL_SHIFT 25,
# ROW_SHIFT 20 in nod-ai/iree-amd-aie test_transaction.cc; col<<25 | row<<20 | offset
# in mlir-aie AIETargetNPU.cpp).
COL_SHIFT, ROW_SHIFT = 25, 20


def split_addr(addr):
    return addr >> COL_SHIFT, (addr >> ROW_SHIFT) & 0x1F, addr & 0xFFFFF


def tile_kind(row, mem_rows=1):
    return 'shim' if row == 0 else 'mem' if row <= mem_rows else 'core'


# BD word contents: field names of XAIEMLGBL_{NOC,MEM_TILE,MEMORY}_MODULE_DMA_BD0_<w>_*
# in aie-rt driver/src/global/xaiemlgbl_params.h (same offsets in xaie2pgbl_params.h).
SHIM_BD = ('buffer length', 'base address low', 'packet / base address high',
           'D0 wrap/stepsize', 'D1 wrap/stepsize, burst length', 'D2 stepsize, SMID/AxCache/AxQoS',
           'iteration', 'next BD / valid / locks')
MEM_BD = ('packet / buffer length', 'next BD / base address', 'D0 wrap/stepsize',
          'D1 wrap/stepsize', 'D2 wrap/stepsize', 'D3 stepsize / zero after', 'iteration',
          'valid / locks')
CORE_BD = ('base address / buffer length', 'packet', 'D0/D1 stepsize',
           'D0/D1 wrap, D2 stepsize', 'iteration', 'next BD / valid / locks')
# kind: (BD base, BD count, words, ctrl base, channels per dir, queue name,
#        S2MM status base, MM2S status base, lock base, locks, data memory size)
TILES = {
    'shim': (0x1D000, 16, SHIM_BD, 0x1D200, 2, 'TASK_QUEUE', 0x1D220, 0x1D228, 0x14000, 16, 0),
    'mem': (0xA0000, 48, MEM_BD, 0xA0600, 6, 'START_QUEUE', 0xA0660, 0xA0680, 0xC0000, 64, 0x80000),
    'core': (0x1D000, 16, CORE_BD, 0x1DE00, 2, 'START_QUEUE', 0x1DF00, 0x1DF10, 0x1F000, 16,
             0x10000)}
SINGLE = {'shim': {0x1F000: 'MUX_CONFIG', 0x1F004: 'DEMUX_CONFIG', 0x36030: 'TILE_CONTROL'},
          'mem': {0x96030: 'TILE_CONTROL', 0xFFF00: 'MODULE_CLOCK_CONTROL',
                  0xFFF10: 'MODULE_RESET_CONTROL'},
          'core': {0x32000: 'CORE_CONTROL', 0x32004: 'CORE_STATUS', 0x32008: 'ENABLE_EVENTS',
                   0x36030: 'TILE_CONTROL', 0x60000: 'MODULE_CLOCK_CONTROL',
                   0x60010: 'MODULE_RESET_CONTROL'}}
SWITCH_BASE = {'shim': 0x3F000, 'mem': 0xB0000, 'core': 0x3F000}


def name_offset(kind, off):
    bd, nbd, words, ctrl, nch, queue, s_st, m_st, lock, nlock, dmem = TILES[kind]
    if bd <= off < bd + 0x20 * nbd and (off - bd) % 0x20 < 4 * len(words):
        i, w = (off - bd) // 0x20, (off - bd) % 0x20 // 4
        return 'DMA_BD%d word%d (%s)' % (i, w, words[w])
    if ctrl <= off < ctrl + 16 * nch:
        k, r = divmod(off - ctrl, 8)
        d = 'S2MM' if k < nch else 'MM2S'
        return 'DMA_%s_%d_%s' % (d, k % nch, queue if r == 4 else 'CTRL')
    for base, d in ((s_st, 'S2MM'), (m_st, 'MM2S')):
        if base <= off < base + 4 * nch:
            return 'DMA_%s_STATUS_%d' % (d, (off - base) // 4)
    if lock <= off < lock + 0x10 * nlock and off % 0x10 == 0:
        return 'LOCK%d_VALUE' % ((off - lock) // 0x10)
    if off < dmem:
        return 'DATA_MEMORY+0x%X' % off
    if kind == 'core' and 0x20000 <= off < 0x24000:
        return 'PROGRAM_MEMORY+0x%X' % (off - 0x20000)
    sw = SWITCH_BASE[kind]
    for base, what in ((sw, 'MASTER_CONFIG'), (sw + 0x100, 'SLAVE_CONFIG'),
                       (sw + 0x200, 'SLAVE_SLOT')):
        if base <= off < base + (0x200 if what == 'SLAVE_SLOT' else 0x100):
            return 'STREAM_SWITCH_%s+0x%X' % (what, off - base)
    return SINGLE[kind].get(off)


def name_register(addr, mem_rows=1):
    """e.g. 0x1D024 -> 'shim(0,0) DMA_BD1 word1 (base address low)'."""
    col, row, off = split_addr(addr)
    kind = tile_kind(row, mem_rows)
    return '%s(%d,%d) %s' % (kind, col, row, name_offset(kind, off) or 'offset 0x%05X' % off)


# --- BD fields, "word.lsb.width NAME": docs/aie-ml-facts.md §1a, i.e. the BD0 *_LSB and *_WIDTH
# macros of aie-rt driver/src/global/xaiemlgbl_params.h. Shim and core share two words' layouts.
PKT_W = ('{w}.30.1 ENABLE_PACKET {w}.24.6 OUT_OF_ORDER_BD_ID {w}.19.5 PACKET_ID'
         ' {w}.16.3 PACKET_TYPE ')
LOCK_W = ('{w}.31.1 TLAST_SUPPRESS {w}.27.4 NEXT_BD {w}.26.1 USE_NEXT_BD {w}.25.1 VALID_BD'
          ' {w}.18.7 LOCK_REL_VALUE {w}.13.4 LOCK_REL_ID {w}.12.1 LOCK_ACQ_ENABLE'
          ' {w}.5.7 LOCK_ACQ_VALUE {w}.0.4 LOCK_ACQ_ID')
BD_FIELDS = {k: {name: tuple(int(x) for x in pos.split('.'))
                 for pos, name in zip(v.split()[::2], v.split()[1::2])} for k, v in {
    'shim': '0.0.32 BUFFER_LENGTH 1.2.30 BASE_ADDRESS_LOW 2.0.16 BASE_ADDRESS_HIGH '
            + PKT_W.format(w=2) + '3.30.1 SECURE_ACCESS 3.20.10 D0_WRAP 3.0.20 D0_STEPSIZE 4.30.2'
            ' BURST_LENGTH 4.20.10 D1_WRAP 4.0.20 D1_STEPSIZE 5.28.4 SMID 5.24.4 AXCACHE'
            ' 5.20.4 AXQOS 5.0.20 D2_STEPSIZE 6.26.6 ITERATION_CURRENT 6.20.6 ITERATION_WRAP 6.0.20'
            ' ITERATION_STEPSIZE ' + LOCK_W.format(w=7),
    'mem': '0.31.1 ENABLE_PACKET 0.28.3 PACKET_TYPE 0.23.5 PACKET_ID 0.17.6 OUT_OF_ORDER_BD_ID'
           ' 0.0.17 BUFFER_LENGTH 1.26.6 D0_ZERO_BEFORE 1.20.6 NEXT_BD 1.19.1 USE_NEXT_BD 1.0.19'
           ' BASE_ADDRESS 2.31.1 TLAST_SUPPRESS 2.17.10 D0_WRAP 2.0.17 D0_STEPSIZE 3.27.5'
           ' D1_ZERO_BEFORE 3.17.10 D1_WRAP 3.0.17 D1_STEPSIZE 4.31.1 ENABLE_COMPRESSION 4.27.4'
           ' D2_ZERO_BEFORE 4.17.10 D2_WRAP 4.0.17 D2_STEPSIZE 5.28.4 D2_ZERO_AFTER 5.23.5'
           ' D1_ZERO_AFTER 5.17.6 D0_ZERO_AFTER 5.0.17 D3_STEPSIZE 6.23.6 ITERATION_CURRENT 6.17.6'
           ' ITERATION_WRAP 6.0.17 ITERATION_STEPSIZE 7.31.1 VALID_BD 7.24.7 LOCK_REL_VALUE 7.16.8'
           ' LOCK_REL_ID 7.15.1 LOCK_ACQ_ENABLE 7.8.7 LOCK_ACQ_VALUE 7.0.8 LOCK_ACQ_ID',
    'core': '0.14.14 BASE_ADDRESS 0.0.14 BUFFER_LENGTH 1.31.1 ENABLE_COMPRESSION '
            + PKT_W.format(w=1) + '2.13.13 D1_STEPSIZE 2.0.13 D0_STEPSIZE 3.21.8 D1_WRAP 3.13.8'
            ' D0_WRAP 3.0.13 D2_STEPSIZE 4.19.6 ITERATION_CURRENT 4.13.6 ITERATION_WRAP 4.0.13'
            ' ITERATION_STEPSIZE ' + LOCK_W.format(w=5)}.items()}
MEM_TILE_BYTES = 0x80000  # one memory tile; its DMA sees west, own, east (facts §4)


def bd_fields(kind, words):
    """Decode one BD (list of its words) into {FIELD: raw value}."""
    return {n: (words[w] >> lsb) & ((1 << width) - 1)
            for n, (w, lsb, width) in BD_FIELDS[kind].items()}


def bd_reach(kind, f):
    """Furthest word offset from BASE_ADDRESS that BUFFER_LENGTH words reach. Steps hold
    stride - 1, wraps the count (facts §1a.1). The first dimension without a wrap (D2 shim and
    core, D3 mem tile, or any with wrap 0: linear BDs leave all 0, facts §2.1) is the
    unbounded outermost. Iteration (repeat) offsets are not counted."""
    radix, step = [], []
    for d in ('D0', 'D1', 'D2', 'D3')[:4 if kind == 'mem' else 3]:
        step.append(f[d + '_STEPSIZE'] + 1)
        if not f.get(d + '_WRAP'):
            break
        radix.append(f[d + '_WRAP'])
    k, digits = max(f['BUFFER_LENGTH'] - 1, 0), []
    for r in radix:
        digits.append(k % r)
        k //= r
    digits.append(k)  # strides > 0: the maximum is at the last index or, for a digit j != 0
    # of it, at digit j one lower with every digit below j at its top value
    cands = [digits] + [[r - 1 for r in radix[:j]] + [digits[j] - 1] + digits[j + 1:]
                        for j in range(len(digits)) if digits[j]]
    return max(sum(d * s for d, s in zip(c, step)) for c in cands)


def bd_problems(kind, f, col, cols):
    """Field problems of one decoded BD (none unless VALID_BD is set)."""
    if not f['VALID_BD']:
        return []
    p, nbd, nlock = [], TILES[kind][1], 192 if kind == 'mem' else 16  # facts §1a.1
    if f['BUFFER_LENGTH'] == 0:
        p.append('BUFFER_LENGTH is 0 but VALID_BD is set')
    if f['USE_NEXT_BD'] and f['NEXT_BD'] >= nbd:
        p.append('NEXT_BD %d is not a BD (this tile has %d)' % (f['NEXT_BD'], nbd))
    # an ID counts when used: acquire enabled, or a release value other than 0
    for which, used in (('ACQ', f['LOCK_ACQ_ENABLE']), ('REL', f['LOCK_REL_VALUE'])):
        i = f['LOCK_%s_ID' % which]
        if used and i >= nlock:
            p.append('LOCK_%s_ID %d is out of range (< %d)' % (which, i, nlock))
        elif used and kind == 'mem' and (i < 64 and col == 0 or i >= 128 and col == cols - 1):
            p.append('LOCK_%s_ID %d is a %s-neighbour lock, but column %d has no such neighbour'
                     % (which, i, 'west' if i < 64 else 'east', col))
    if kind != 'shim' and f['BUFFER_LENGTH']:
        lo = 4 * f['BASE_ADDRESS']
        hi = lo + 4 * bd_reach(kind, f) + 3
        win = (0, TILES['core'][10]) if kind == 'core' else (  # west, own, east (facts §4)
            0 if col else MEM_TILE_BYTES, (3 if col < cols - 1 else 2) * MEM_TILE_BYTES)
        if lo < win[0] or hi >= win[1]:
            p.append('BASE_ADDRESS: bytes 0x%X..0x%X leave the DMA window 0x%X..0x%X'
                     % (lo, hi, win[0], win[1] - 1))
    return p


def check(hdr, ops):
    """Project rules. Returns a list of problem strings (empty: all good)."""
    bad = []
    if hdr['dev_gen'] not in (3, 4):
        bad.append('header DevGen=%d, expected 3 (AIE2IPU) or 4 (AIE2P)' % hdr['dev_gen'])
    cols, rows, mrows = hdr['num_cols'], hdr['num_rows'], hdr['num_mem_tile_rows']
    # regs: (col,row) -> {offset: value} written so far (unwritten words read 0); writer:
    # (col,row,bd) -> last op writing a word of that BD, i.e. the BD is "programmed" (a
    # DDR_PATCH only relocates an address: it does not count); seen: BD problems reported.
    regs, writer, seen = {}, {}, set()

    def in_array(op, addr, what):
        col, row, off = split_addr(addr)
        if addr >> 32 or col >= cols or row >= rows:
            bad.append('op %d (%s) at byte %d: %s 0x%X is tile (%d,%d), outside the %dx%d array'
                       % (op['index'], op['name'], op['offset'], what, addr, col, row, cols, rows))
            return False
        return True

    def bd_check(op, col, row, bd):
        kind = tile_kind(row, mrows)
        base, r = TILES[kind][0] + 0x20 * bd, regs[(col, row)]
        f = bd_fields(kind, [r.get(base + 4 * w, 0) for w in range(len(TILES[kind][2]))])
        for m in bd_problems(kind, f, col, cols):
            if (col, row, bd, m) not in seen:
                seen.add((col, row, bd, m))
                bad.append('op %d (%s) at byte %d: %s(%d,%d) BD%d %s'
                           % (op['index'], op['name'], op['offset'], kind, col, row, bd, m))
        return f

    def queue(op, at, col, row, off):  # judge a queue push once the whole op is applied
        kind = tile_kind(row, mrows)
        ctrl, nbd, nch = TILES[kind][3], TILES[kind][1], TILES[kind][4]
        if not (ctrl <= off < ctrl + 16 * nch and (off - ctrl) % 8 == 4):
            return
        bd = regs[(col, row)][off] & (0x3F if kind == 'mem' else 0xF)
        q = '%s: %s(%d,%d) %s START_BD_ID %d' % (at, kind, col, row, name_offset(kind, off), bd)
        if bd >= nbd:
            bad.append('%s is not a BD (this tile has %d)' % (q, nbd))
        elif kind == 'mem' and bd // 24 != (off - ctrl) // 8 % 2:
            bad.append('%s: BDs 0-23 serve even channels only, 24-47 odd ones' % q)
        # a BD this transaction did not write may have been set up before it: not judged
        if bd < nbd and (col, row, bd) in writer and not bd_check(op, col, row, bd)['VALID_BD']:
            bad.append('%s: BD%d is not VALID' % (q, bd))

    for op in ops:
        at = 'op %d (%s) at byte %d' % (op['index'], op['name'], op['offset'])
        if op['name'] in ADDR_OPS:
            a = op['addr']
            if a % 4:
                bad.append('%s: address 0x%X is not 4-byte aligned' % (at, a))
            in_array(op, a, 'address')
            if op['name'] == 'BLOCKWRITE' and op['data']:
                last = a + 4 * len(op['data']) - 4
                if split_addr(last)[:2] != split_addr(a)[:2]:
                    bad.append('%s: block write 0x%X..0x%X crosses a tile' % (at, a, last))
            if op['name'] not in ('WRITE', 'BLOCKWRITE', 'MASKWRITE') or a % 4:
                continue
            done, mask = [], op.get('mask', 0xFFFFFFFF)
            for i, v in enumerate(op['data'] if op['name'] == 'BLOCKWRITE' else [op['value']]):
                col, row, off = split_addr(a + 4 * i)  # col takes every bit above 2^25
                kind = tile_kind(row, mrows)
                if col < cols and row < rows and off >= TILES[kind][10]:  # not data memory
                    r = regs.setdefault((col, row), {})
                    r[off] = r.get(off, 0) & ~mask | v & mask
                    bd, w = divmod(off - TILES[kind][0], 0x20)
                    if 0 <= bd < TILES[kind][1] and w < 4 * len(TILES[kind][2]):
                        writer[(col, row, bd)] = op
                    done.append((col, row, off))
            for t in done:
                queue(op, at, *t)
        elif op['name'] == 'DDR_PATCH':
            r = op['regaddr']
            if in_array(op, r, 'regaddr'):
                col, row, off = split_addr(r)
                bd, word = divmod(off - 0x1D000, 0x20)
                if row != 0 or not (0 <= bd < 16 and word == 4):
                    bad.append('%s: regaddr 0x%X = %s is not word 1 of a shim DMA BD'
                               % (at, r, name_register(r, mrows)))
            if op['argplus'] % 4:
                bad.append('%s: argplus 0x%X is not 4-byte aligned' % (at, op['argplus']))
        elif op['name'] == 'TCT' and (op['col'] >= cols or op['row'] >= rows):
            bad.append('%s: sync on tile (%d,%d) outside the array' % (at, op['col'], op['row']))
    for (col, row, bd), op in sorted(writer.items(), key=lambda kv: (kv[1]['index'], kv[0])):
        bd_check(op, col, row, bd)  # every programmed BD as the transaction leaves it
    return bad


def summary(hdr, ops):
    counts = Counter(op['name'] for op in ops)
    return '%s %s %dx%d (mem rows %d), %d ops, %d bytes: %s' % (
        hdr['version'], DEV_GEN.get(hdr['dev_gen'], 'gen%d' % hdr['dev_gen']), hdr['num_cols'],
        hdr['num_rows'], hdr['num_mem_tile_rows'], len(ops), hdr['txn_size'],
        ' '.join('%s=%d' % kv for kv in sorted(counts.items())))


def describe(op, mem_rows):
    s = '#%d @%d %s' % (op['index'], op['offset'], op['name'])
    if 'addr' in op:
        s += ' %s [0x%08X]' % (name_register(op['addr'], mem_rows), op['addr'])
    if 'regaddr' in op:
        s += ' %s [0x%X] arg%d+0x%X' % (name_register(op['regaddr'], mem_rows), op['regaddr'],
                                        op['argidx'], op['argplus'])
    for k in ('value', 'mask', 'level', 'pdi_id', 'col', 'row', 'channel', 'direction', 'count'):
        if k in op:
            s += ' %s=0x%X' % (k, op[k])
    if 'data' in op:
        s += ' words=%d' % len(op['data'])
    return s


# ---------------------------------------------------------------- self-test
def _w(text):
    """Hex words (as printed by `aie-translate -aie-output-binary=false`) to bytes."""
    ws = [int(t, 16) for t in text.split()]
    return struct.pack('<%dI' % len(ws), *ws)


BW8 = '00000064 00000065 00000066 00000067 00000068 00000069 0000006A 0000006B'
# Xilinx/mlir-aie test/Targets/NPU/npu_instgen.mlir (npu1, TXN 0.1), every CHECK word.
PUB_NPU1 = ('06030100 00000104 00000007 000000DC'
            ' 00000000 00000000 06400DEF 00000000 00000042 00000018'
            ' 00000000 00000000 ABC00DEF 00000000 00000314 00000018'
            ' 00000001 00000000 12345679 00000030 ' + BW8 +
            ' 00000001 00000101 02100064 00000030 ' + BW8 +
            ' 00000003 00000000 0430567A 00000000 00001001 F00FF00F 0000001C'
            ' 00000080 00000010 00030401 05010200'
            ' 00020008 00000400 12345678 00000ABC')
# Xilinx/mlir-aie test/Targets/NPU/npu2_instgen.mlir (npu2): same ops, PREEMPT last.
PUB_NPU2 = ('06040100 00000108 00000007 000000D0'
            ' 00000000 00000000 06400DEF 00000000 00000042 00000018'
            ' 00000000 00000000 ABC00DEF 00000000 00000314 00000018'
            ' 00000001 00000000 12345679 00000030 ' + BW8 +
            ' 00000001 00000101 02100064 00000030 ' + BW8 +
            ' 00000003 00000000 0430567A 00000000 00001001 F00FF00F 0000001C'
            ' 00000080 00000010 00030401 05010200'
            ' 00000306')
# Xilinx/mlir-aie test/Targets/NPU/npu_blockwrite_instgen.mlir (TXN 0.1): mem-tile BD6.
PUB_BD = ('06030100 00000104 00000003 00000068'
          ' 00000001 00000000 061A00C0 00000030 00000001 00580002 000C0005 00100007'
          ' 00000009 00000000 059A000C 84038201'
          ' 00000000 00000000 06400DEF 00000000 00000042 00000018'
          ' 00000080 00000010 00030401 05010200')
# The 2024 version of the same test (`--aie-npu-instgen`, TXN 1.0 header 06030001).
# Its CHECK lines skip the BLOCKWRITE opcode word and the TCT opcode/size words; they
# are filled in from the 1.0 writer of mlir-aie lib/Targets/AIETargetNPU.cpp of that
# time (opcode word, then Size = 16); TxnSize 0x58 pins the total.
PUB_BD_V10 = ('06030001 00000104 00000003 00000058'
              ' 00000001 061A00C0 0000002C 00000001 00580002 000C0005 00100007'
              ' 00000009 00000000 059A000C 84038201'
              ' 00000000 06400DEF 00000042'
              ' 00000080 00000010 00030401 05010200')
# The nonzero aiex.npu.writebd attributes of that test (mlir-aie stores them as given:
# stepsizes and iteration size/stride are already "minus 1"); all other fields are 0:
# d2_size = 1 and ddr_id = 10 have no mem-tile field mlir-aie writes (facts §1a.2).
PUB_BD_FIELDS = dict(
    BUFFER_LENGTH=1, BASE_ADDRESS=2, D0_STEPSIZE=5, D0_WRAP=6, D1_STEPSIZE=7, D1_WRAP=8,
    D2_STEPSIZE=9, ITERATION_CURRENT=11, ITERATION_STEPSIZE=12, ITERATION_WRAP=13,
    LOCK_ACQ_ENABLE=1, LOCK_ACQ_ID=1, LOCK_ACQ_VALUE=2, LOCK_REL_ID=3, LOCK_REL_VALUE=4,
    NEXT_BD=5, USE_NEXT_BD=1, VALID_BD=1)
# Xilinx/mlir-aie test/Targets/NPU/npu_read_reg_instgen.mlir (npu2, READ_REGS 0x82).
PUB_READREG = '06040100 00000108 00000001 00000020 00000082 00000010 00000001 04300100'
# DDR_PATCH words 6..11 from Xilinx/mlir-aie test/Targets/NPU/
# npu_address_patch_arg_plus_64bit.mlir (and arg_idx 4/5 words from
# npu_address_patch_ddr_offset.mlir, FOLD prefix); words 0..5 are opcode, Size 48
# and zeros (op_base, action) as written by mlir-aie AIETargetNPU.cpp.
PATCH_PRE = ' 00000081 00000030 00000000 00000000 00000000 00000000 '
PUB_PATCH = [('00012340 00000000 00000000 00000000 FFFFFFFF 00000000', 0, 0xFFFFFFFF),
             ('00012340 00000000 00000000 00000000 00000000 00000001', 0, 1 << 32),
             ('00012340 00000000 00000000 00000000 00000100 00000002', 0, 0x200000100),
             ('00012340 00000000 00000004 00000000 00000100 00000000', 4, 0x100),
             ('00012340 00000000 00000005 00000000 80000100 00000000', 5, 0x80000100)]
# nod-ai/iree-amd-aie runtime/src/iree-amd-aie/aie_runtime/test/test_transaction.cc:
# aie-rt's own export, printed field by field: header 0.1, DevGen 2, (cols, rows,
# mem rows) = (5, 6, 1), TxnSize 352, NumOps 12; (op, Col, Row, RegOff, Value, Mask, Size).
IREE_OPS = [(3, 2, 0, 2301952, 2, 2, 32), (3, 2, 0, 2301952, 0, 2, 32),
            (0, 2, 0, 2224128, 1, 0, 24), (0, 2, 16, 2224144, 0, 0, 24),
            (3, 2, 0, 35856384, 2, 2, 32), (3, 2, 0, 35856384, 0, 2, 32),
            (0, 2, 0, 35778560, 1, 0, 24), (0, 2, 16, 35778576, 0, 0, 24),
            (3, 2, 0, 69410816, 2, 2, 32), (3, 2, 0, 69410816, 0, 2, 32),
            (0, 2, 0, 69332992, 1, 0, 24), (0, 2, 16, 69333008, 0, 0, 24)]


def _hdr(major, minor, body, n, gen=3, rows=6, cols=4, mrows=1):
    return HEADER.pack(major, minor, gen, rows, cols, mrows, 0, n, 16 + len(body)) + body


def _addr(col, row, off):
    return col << COL_SHIFT | row << ROW_SHIFT | off


# Hand-built BDs that pass --check (facts §1a packing). shim(0,0) BD2: 16 words at byte
# 0x1000, AxCache 2. mem(1,1) BD30: 256 words from byte 0x80000 (own memory) as 16 x 16
# (D0 stride 1, D1 stride 16), next BD31, acquire-GE 1 (value -1) on own lock 65, release
# +1 on lock 66. core(2,2) BD3: 1024 words at byte 0x1000, acquire lock 0, release lock 1.
BD_OK = {'shim': [16, 0x1000, 0, 0, 0, 2 << 24, 0, 1 << 25],
         'mem': [256, 31 << 20 | 1 << 19 | 0x20000, 16 << 17, 16 << 17 | 15, 0, 0, 0,
                 1 << 31 | 1 << 24 | 66 << 16 | 1 << 15 | 0x7F << 8 | 65],
         'core': [0x400 << 14 | 1024, 0, 0, 0, 0,
                  1 << 25 | 1 << 18 | 1 << 13 | 1 << 12 | 0x7F << 5]}


def _bd_recs(kind=None, word=0, value=0):
    """BD_OK (one word changed), each pushed; mem word 7 by a write, then VALID_BD masked in."""
    w = {k: list(v) for k, v in BD_OK.items()}
    if kind:
        w[kind][word] = value
    m, c = w['mem'], w['core']
    return [(_addr(0, 0, 0x1D040), w['shim']), (_addr(0, 0, 0x1D214), 2),
            (_addr(1, 1, 0xA03C0), m[:7]), (_addr(1, 1, 0xA03DC), m[7] & ~(1 << 31)),
            (_addr(1, 1, 0xA03DC), m[7], 1 << 31), (_addr(1, 1, 0xA060C), 30),
            (_addr(2, 2, 0x1D060), c[:4]), (_addr(2, 2, 0x1D070), c[4]),
            (_addr(2, 2, 0x1D074), c[5]), (_addr(2, 2, 0x1DE14), 1 << 31 | 3)]


def _txn(recs, cols=4):
    """v0.1 of records (addr, value) WRITE, (addr, [words]) BLOCKWRITE, (addr, value, mask)
    MASKWRITE, or raw bytes; decoded."""
    pack = lambda r: r if isinstance(r, bytes) else (  # noqa: E731
        B01.pack(1, 0, 0, 0, 0, r[0], 16 + 4 * len(r[1])) + struct.pack('<%dI' % len(r[1]), *r[1])
        if isinstance(r[1], list) else M01.pack(3, 0, 0, r[0], r[1], r[2], 28) if len(r) == 3
        else W01.pack(0, 0, 0, r[0], r[1], 24))
    return decode(_hdr(0, 1, b''.join(map(pack, recs)), len(recs), cols=cols))

def _hand_built(opt):
    """One of each record, laid out from the aie-rt structs (all addresses valid)."""
    a_core, a_shim_q, a_bd = _addr(0, 2, 0x32000), _addr(1, 0, 0x1D214), _addr(3, 0, 0x1D000)
    bd = struct.pack('<8I', 0x800, 0, 0, 0x2000000, 0x8200003F, 0x7FF, 0, 0x2000000)
    patch = (lambda r, i, p, sib=0: CUSTOM.pack(129, 24) + PATCH10.pack(r, i, p)) if opt else \
        (lambda r, i, p, sib=0: CUSTOM.pack(129, 48) + PATCH01.pack(0, sib, 0, 0, r, i, p))
    recs = [W10.pack(0, a_core, 1) if opt else W01.pack(0, 0, 2, a_core, 1, 24),
            M10.pack(3, a_shim_q, 5, 0xF) if opt else M01.pack(3, 1, 0, a_shim_q, 5, 0xF, 28),
            M10.pack(4, a_core, 1, 3) if opt else M01.pack(4, 0, 2, a_core, 1, 3, 32) + bytes(4),
            M10.pack(7, a_core, 2, 2) if opt else M01.pack(7, 0, 2, a_core, 2, 2, 28),
            (B10.pack(1, a_bd, 44) if opt else B01.pack(1, 3, 0, 0, 0, a_bd, 48)) + bd,
            NOOP.pack(5), PREEMPT.pack(6, 2, 0), LOADPDI.pack(8, 0, 7, 0x400, 0xABC12345678),
            CUSTOM.pack(128, 16) + TCT.pack(0x00030001, 0x05010100),
            patch(_addr(1, 0, 0x1D004 + 0x20 * 3), 2, 0x40),
            patch(_addr(0, 0, 0x1D004), 0, 0, 40),
            CUSTOM.pack(144, 20) + bytes(range(12))]
    names = ['WRITE', 'MASKWRITE', 'MASKPOLL', 'MASKPOLL_BUSY', 'BLOCKWRITE', 'NOOP', 'PREEMPT',
             'LOADPDI', 'TCT', 'DDR_PATCH', 'DDR_PATCH', 'CUSTOM_144']
    return _hdr(1 if opt else 0, 0 if opt else 1, b''.join(recs), len(recs)), names


def selftest():
    fails = []

    def ok(cond, what):
        if not cond:
            fails.append(what)

    def rejects(data, needle, what):
        try:
            decode(data)
        except TxnError as e:
            ok(needle in str(e), '%s: message %r lacks %r' % (what, str(e), needle))
        else:
            fails.append('%s: corrupt container accepted' % what)

    def pick(op, *keys):
        return tuple(op.get(k) for k in keys)

    try:
        for text, gen, cols, last in ((PUB_NPU1, 3, 4, 'LOADPDI'), (PUB_NPU2, 4, 8, 'PREEMPT')):
            h, ops = decode(_w(text))
            ok(pick(h, 'version', 'dev_gen', 'num_rows', 'num_cols', 'num_mem_tile_rows',
                    'num_ops') == ('v0.1', gen, 6, cols, 1, 7), 'instgen header %r' % h)
            ok([o['name'] for o in ops] == ['WRITE', 'WRITE', 'BLOCKWRITE', 'BLOCKWRITE',
                                            'MASKWRITE', 'TCT', last], 'instgen op names')
            ok(pick(ops[0], 'addr', 'value', 'size') == (0x06400DEF, 0x42, 24), 'write32 col3 row4')
            ok(split_addr(ops[0]['addr'])[:2] == (3, 4), 'write32 tile (3,4)')
            ok(pick(ops[1], 'addr', 'value') == (0xABC00DEF, 0x314), 'write32 raw address')
            ok(ops[2]['addr'] == 0x12345679 and ops[2]['data'] == list(range(100, 108)),
               'blockwrite')
            ok(split_addr(ops[3]['addr']) == (1, 1, 100), 'blockwrite col1 row1 addr 100')
            ok(pick(ops[4], 'addr', 'value', 'mask', 'size') ==
               (0x0430567A, 0x1001, 0xF00FF00F, 28), 'maskwrite (mlir-aie 28-byte record)')
            ok(pick(ops[5], 'col', 'row', 'direction', 'channel', 'col_num', 'row_num') ==
               (3, 4, 1, 5, 1, 2), 'npu.sync -> TCT fields')
            if last == 'LOADPDI':
                ok(pick(ops[6], 'pdi_id', 'pdi_size', 'pdi_address') == (2, 1024, 0xABC12345678),
                   'load_pdi fields')
            else:
                ok(ops[6]['level'] == 3, 'preempt level')
        for text, ver, size in ((PUB_BD, 'v0.1', 48), (PUB_BD_V10, 'v1.0', 44)):
            h, ops = decode(_w(text))
            ok(h['version'] == ver and [o['name'] for o in ops] == ['BLOCKWRITE', 'WRITE', 'TCT'],
               'writebd %s ops' % ver)
            ok(pick(ops[0], 'addr', 'size') == (0x061A00C0, size), 'writebd %s record' % ver)
            ok(name_register(ops[0]['addr']) == 'mem(3,1) DMA_BD6 word0 (packet / buffer length)',
               'mem-tile BD name: %s' % name_register(ops[0]['addr']))
            ok(pick(ops[1], 'addr', 'value') == (0x06400DEF, 0x42), 'writebd %s write32' % ver)
            f = bd_fields('mem', ops[0]['data'])
            ok(f == dict(dict.fromkeys(f, 0), **PUB_BD_FIELDS), 'writebd %s fields %r' % (
                ver, [(k, v) for k, v in f.items() if PUB_BD_FIELDS.get(k, 0) != v]))
        # D0 wrap 6 stride 6, D1 wrap 8 stride 8, D2 stride 10: furthest word, brute force
        ok(all(bd_reach('mem', dict(f, BUFFER_LENGTH=n)) ==
               max(k % 6 * 6 + k // 6 % 8 * 8 + k // 48 * 10 for k in range(n))
               for n in range(1, 150)), 'bd_reach against brute force')
        h, ops = decode(_w(PUB_READREG))
        ok(pick(ops[0], 'name', 'count', 'words') == ('READ_REGS', 1, [0x04300100]), 'read_reg')
        ok(name_register(0x04300100) == 'core(2,3) DATA_MEMORY+0x100', 'core data memory name')
        body = b''.join(_w(PATCH_PRE + t) for t, _, _ in PUB_PATCH)
        h, ops = decode(_hdr(0, 1, body, len(PUB_PATCH), gen=4, cols=8))
        ok([pick(o, 'regaddr', 'argidx', 'argplus', 'size_in_bytes', 'size') for o in ops] ==
           [(0x12340, i, p, 0, 48) for _, i, p in PUB_PATCH], 'address_patch fields')
        body = b''.join(struct.pack('<3B5xQII' if op == 0 else '<3B5xQIII4x', op, c, r, a, v,
                                    *((sz,) if op == 0 else (m, sz)))
                        for op, c, r, a, v, m, sz in IREE_OPS)
        data = _hdr(0, 1, body, 12, gen=2, rows=6, cols=5)
        ok(len(data) == 352, 'iree test_transaction TxnSize 352')
        h, ops = decode(data)
        ok([(o['opcode'], o['hdr_col'], o['hdr_row'], o['addr'], o['value'], o.get('mask', 0),
             o['size']) for o in ops] == IREE_OPS, 'iree test_transaction ops')
        ok([name_register(a) for a in (2301952, 2224128, 2224144)] ==
           ['core(0,2) CORE_CONTROL', 'core(0,2) LOCK0_VALUE', 'core(0,2) LOCK1_VALUE'],
           'core tile names')
        ok(check(h, ops) == ['header DevGen=2, expected 3 (AIE2IPU) or 4 (AIE2P)'], 'devgen rule')
        # Xilinx/mlir-aie test/Targets/NPU/npu_dma_memcpy.mlir: blockwrite @118784,
        # address_patch @118788 (arg 0, +16384), write32 @119316 (npu1_1col: 1 column).
        names = [name_register(a) for a in (118784, 118788, 119316)]
        ok(names == ['shim(0,0) DMA_BD0 word0 (buffer length)',
                     'shim(0,0) DMA_BD0 word1 (base address low)',
                     'shim(0,0) DMA_MM2S_0_TASK_QUEUE'], 'shim names %r' % names)
        bd = struct.pack('<8i', 2048, 0, 0, 33554432, -2113929153, 2047, 0, 33554432)
        body = (B01.pack(1, 0, 0, 0, 0, 118784, 48) + bd + CUSTOM.pack(129, 48) +
                PATCH01.pack(0, 0, 0, 0, 118788, 0, 16384) + W01.pack(0, 0, 0, 119316, 0, 24))
        h, ops = decode(_hdr(0, 1, body, 3, cols=1))
        ok(check(h, ops) == [], 'dma_memcpy lowering passes --check: %r' % check(h, ops))

        bd6, q, m1, m7 = _u32s(_w(PUB_BD))[8:16], _bd_recs(), BD_OK['mem'][1], BD_OK['mem'][7]
        west = 'is a west-neighbour lock, but column 0 has no such neighbour'
        par = ': BDs 0-23 serve even channels only, 24-47 odd ones'
        sq, win = '_START_QUEUE START_BD_ID ', ' leave the DMA window '
        cases = [  # (records, op index, its complaints): BD and queue rules, facts §1a-§1c
            (q, 0, []), (q[:5] + [(_addr(1, 1, 0xA0604), 30)] + q[6:], 5,
                         ['mem(1,1) DMA_S2MM_0' + sq + '30' + par]),
            ([(0x061A00C0, bd6), (_addr(3, 1, 0xA0634), 6)], 0, []),  # published BD, MM2S_0
            ([(0x061A00C0, bd6), (_addr(3, 1, 0xA063C), 6)], 1,
             ['mem(3,1) DMA_MM2S_1' + sq + '6' + par]),
            ([(0x061A00C0, bd6[:1] + [bd6[1] | 0x40000] + bd6[2:])], 0,  # column 3: no east
             ['mem(3,1) BD6 BASE_ADDRESS: bytes 0x100008..0x10000B' + win + '0x0..0xFFFFF']),
            ([(_addr(0, 1, 0xA00C0), bd6)], 0,  # column 0 has no west neighbour
             ['mem(0,1) BD6 LOCK_ACQ_ID 1 ' + west, 'mem(0,1) BD6 LOCK_REL_ID 3 ' + west,
              'mem(0,1) BD6 BASE_ADDRESS: bytes 0x8..0xB' + win + '0x80000..0x17FFFF']),
            (_bd_recs('shim', 0, 0), 1, ['shim(0,0) BD2 BUFFER_LENGTH is 0 but VALID_BD is set']),
            ([(_addr(0, 0, 0x1D040), [0] * 8)], 0, []),  # cleared BD: not VALID, not judged
            (_bd_recs('shim', 0, 0)[:1], 0,  # never queued: judged at the end
             ['shim(0,0) BD2 BUFFER_LENGTH is 0 but VALID_BD is set']),
            (_bd_recs('mem', 7, m7 & ~0xFF | 200), 5,
             ['mem(1,1) BD30 LOCK_ACQ_ID 200 is out of range (< 192)']),
            (_bd_recs('mem', 7, m7 & ~0xFF0000 | 150 << 16), 5, []),  # east lock, column 1
            (_bd_recs('core', 0, 0x3F00 << 14 | 1024), 9,
             ['core(2,2) BD3 BASE_ADDRESS: bytes 0xFC00..0x10BFF' + win + '0x0..0xFFFF']),
            (_bd_recs('mem', 1, m1 & ~(0x3F << 20) | 50 << 20), 5,
             ['mem(1,1) BD30 NEXT_BD 50 is not a BD (this tile has 48)']),
            (_bd_recs('mem', 1, m1 & ~0x7FFFF | 0x5FFF0), 5,
             ['mem(1,1) BD30 BASE_ADDRESS: bytes 0x17FFC0..0x1803BF' + win + '0x0..0x17FFFF']),
            (_bd_recs('core', 5, BD_OK['core'][5] & ~(1 << 25)), 9,
             ['core(2,2) DMA_MM2S_0' + sq + '3: BD3 is not VALID']),
            ([(_addr(1, 1, 0xA0604), 50)], 0,
             ['mem(1,1) DMA_S2MM_0' + sq + '50 is not a BD (this tile has 48)']),
            # DDR_PATCH of word 1 does not program BD5: its queue push is not judged
            ([CUSTOM.pack(129, 48) + PATCH01.pack(0, 0, 0, 0, 0x1D0A4, 0, 0), (0x1D214, 5)], 0, [])]
        for n, (recs, i, texts) in enumerate(cases):
            h, ops = _txn(recs)
            at = 'op %d (%s) at byte %d: ' % (i, ops[i]['name'], ops[i]['offset'])
            ok(check(h, ops) == [at + t for t in texts], 'BD case %d: %r' % (n, check(h, ops)))

        for opt in (False, True):
            tag = 'v1.0' if opt else 'v0.1'
            data, names = _hand_built(opt)
            h, ops = decode(data)
            ok([o['name'] for o in ops] == names, '%s hand-built names' % tag)
            ok(check(h, ops) == [], '%s hand-built --check: %r' % (tag, check(h, ops)))
            ok(pick(ops[0], 'addr', 'value') == (_addr(0, 2, 0x32000), 1), tag + ' write')
            ok(pick(ops[1], 'value', 'mask') == (5, 0xF), tag + ' maskwrite')
            ok(ops[2]['size'] == (16 if opt else 32), tag + ' 32-byte maskpoll')
            ok(ops[4]['data'][0] == 0x800 and len(ops[4]['data']) == 8, tag + ' blockwrite')
            ok(pick(ops[6], 'level') == (2,) and ops[7]['pdi_id'] == 7, tag + ' preempt/loadpdi')
            ok(pick(ops[8], 'col', 'row', 'channel') == (3, 0, 5), tag + ' tct')
            ok(pick(ops[9], 'regaddr', 'argidx', 'argplus', 'size') ==
               (_addr(1, 0, 0x1D064), 2, 0x40, 24 if opt else 48), tag + ' ddr_patch')
            ok(ops[11]['raw'] == bytes(range(12)), tag + ' private custom op skipped')
            first = 16 + ops[0]['size']  # byte offset of op 1
            rejects(data[:-1], 'TxnSize', tag + ' truncated file')
            cut = bytearray(data[:-4])
            struct.pack_into('<I', cut, 12, len(cut))
            rejects(bytes(cut), 'op 11 (CUSTOM_144)', tag + ' truncated record')
            for n, needle in ((13, 'NumOps=13'), (11, 'after the 11 ops')):
                bad = bytearray(data)
                struct.pack_into('<I', bad, 8, n)
                rejects(bytes(bad), needle, '%s NumOps %d' % (tag, n))
            for off, val, needle in ((first, 0x30, 'unknown opcode 48'), (first, 2, 'BLOCKSET'),
                                     (0, 2, 'unsupported TXN version')):
                bad = bytearray(data)
                bad[off] = val
                rejects(bytes(bad), needle, '%s byte %d = %d' % (tag, off, val))
            bw = 16 + sum(o['size'] for o in ops[:4])
            bad = bytearray(data)
            struct.pack_into('<I', bad, bw + (8 if opt else 12), 46)
            rejects(bytes(bad), 'op 4 (BLOCKWRITE) at byte %d: bad size' % bw, tag + ' bw size')
            cst = ops[11]['offset']
            bad = bytearray(data)
            struct.pack_into('<I', bad, cst + 4, 4)
            rejects(bytes(bad), 'bad size field 4', tag + ' custom size < 8')
            if not opt:
                bad = bytearray(data)
                struct.pack_into('<I', bad, 16 + 20, 20)
                rejects(bytes(bad), 'op 0 (WRITE) at byte 16: bad size field 20', 'v0.1 write size')
                bad = bytearray(data)
                struct.pack_into('<I', bad, ops[10]['offset'] + 12, 7)
                rejects(bytes(bad), 'size_in_bytes=7', 'v0.1 patch size_in_bytes')
            # --check must catch: core-tile patch target, odd argplus, odd address, column.
            ops[9]['regaddr'], ops[9]['argplus'] = _addr(0, 2, 0x1D000), 2
            ops[0]['addr'] += 2
            ops[1]['addr'] = _addr(4, 0, 0x1D214)
            probs = ' | '.join(check(h, ops))
            for needle in ('not word 1 of a shim DMA BD', 'argplus 0x2', 'not 4-byte aligned',
                           'tile (4,0), outside the 4x6 array'):
                ok(needle in probs, '%s --check misses %r' % (tag, needle))
    except (TxnError, KeyError, IndexError, struct.error) as e:
        fails.append('unexpected %s: %s' % (type(e).__name__, e))
    for f in fails:
        print('selftest FAIL: ' + f)
    print('selftest: %s' % ('FAILED (%d)' % len(fails) if fails else 'OK'))
    return 1 if fails else 0


def main(argv):
    flags = {a for a in argv if a.startswith('--')}
    files = [a for a in argv if not a.startswith('--')]
    unknown = flags - {'--check', '--quiet', '--dump', '--selftest'}
    if unknown or (not files and '--selftest' not in flags):
        print('\n'.join(__doc__.strip().splitlines()[-2:]), file=sys.stderr)
        return 2
    if '--selftest' in flags:
        return selftest()
    status = 0
    for path in files:
        try:
            with open(path, 'rb') as fh:
                hdr, ops = decode(fh.read())
        except (OSError, TxnError) as e:
            print('%s: ERROR %s' % (path, e))
            status = 1
            continue
        problems = check(hdr, ops) if '--check' in flags else []
        if problems:
            status = 1
            print('%s: FAIL %d problem(s); %s' % (path, len(problems), summary(hdr, ops)))
            for p in problems[:20]:
                print('  ' + p)
            if len(problems) > 20:
                print('  ... %d more' % (len(problems) - 20))
        elif '--quiet' not in flags:
            print('%s: %s%s' % (path, 'OK ' if '--check' in flags else '', summary(hdr, ops)))
        if '--dump' in flags:
            for op in ops:
                print('  ' + describe(op, hdr['num_mem_tile_rows']))
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
