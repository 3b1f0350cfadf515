#!/usr/bin/env python3
"""Parses every `segments[]` entry of a bundlec partition cache (`--partition-cache FILE`) as protobuf JSON of
VAIP's `vaip_core.MetaDefProto`, strictly (an unknown field or a wrong type is an error), with Google's protobuf
runtime, as VAIP's tooling reads its cache.

The message is declared here from the field list of VAIP's capability.proto (package vaip_core, proto3):
  string id = 1; repeated string inputs = 2; repeated string outputs = 3; repeated string nodes = 4;
  repeated string constant_initializers = 5; string device = 6; map<string, string> generic_param = 7;
  oneof device_param { DpuParam dpu_param = 8; AsrParam asr_param = 9; DdParam dd_param = 10;
                       VaimlParam vaiml_param = 11; }  bool fallback_CPU = 12;
The oneof's messages are declared empty but for DdParam (string xclbin = 1): bundlec writes none of them.
It also checks what a cache must hold beyond the schema: a non-empty unique `id`, at least one node, every
`generic_param` value a decimal count, and `version`, `key` and `rejected` at file level.

usage: check_metadef.py CACHE.json [...]      exit status 0 when every file passes
"""
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

F = descriptor_pb2.FieldDescriptorProto


def metadef_class():
    fd = descriptor_pb2.FileDescriptorProto(name='capability_check.proto', package='vaip_core', syntax='proto3')
    for empty in ('DpuParam', 'AsrParam', 'VaimlParam'):
        fd.message_type.add(name=empty)
    dd = fd.message_type.add(name='DdParam')
    dd.field.add(name='xclbin', number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name='xclbin')
    m = fd.message_type.add(name='MetaDefProto')
    entry = m.nested_type.add(name='GenericParamEntry')
    entry.options.map_entry = True
    entry.field.add(name='key', number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name='key')
    entry.field.add(name='value', number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name='value')
    m.oneof_decl.add(name='device_param')

    def field(name, number, ftype, label=F.LABEL_OPTIONAL, type_name=None, oneof=None):
        f = m.field.add(name=name, number=number, type=ftype, label=label,
                        json_name=''.join(w if i == 0 else w[:1].upper() + w[1:]
                                          for i, w in enumerate(name.split('_'))))
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof

    field('id', 1, F.TYPE_STRING)
    for number, name in enumerate(('inputs', 'outputs', 'nodes', 'constant_initializers'), start=2):
        field(name, number, F.TYPE_STRING, F.LABEL_REPEATED)
    field('device', 6, F.TYPE_STRING)
    field('generic_param', 7, F.TYPE_MESSAGE, F.LABEL_REPEATED, '.vaip_core.MetaDefProto.GenericParamEntry')
    for number, (name, msg) in enumerate((('dpu_param', 'DpuParam'), ('asr_param', 'AsrParam'),
                                          ('dd_param', 'DdParam'), ('vaiml_param', 'VaimlParam')), start=8):
        field(name, number, F.TYPE_MESSAGE, type_name=f'.vaip_core.{msg}', oneof=0)
    field('fallback_CPU', 12, F.TYPE_BOOL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName('vaip_core.MetaDefProto'))


def check(path, MetaDef):
    doc = json.load(open(path))
    for key in ('version', 'key', 'target', 'segments', 'rejected'):
        if key not in doc:
            raise ValueError(f'{path}: file-level `{key}` missing')
    ids = set()
    for i, seg in enumerate(doc['segments']):
        where = f'{path}: segments[{i}]'
        msg = json_format.Parse(json.dumps(seg), MetaDef())    # strict: unknown fields are errors
        if not msg.id or msg.id in ids:
            raise ValueError(f'{where}: id {msg.id!r} empty or repeated')
        ids.add(msg.id)
        if not msg.nodes:
            raise ValueError(f'{where}: no nodes')
        for k, v in msg.generic_param.items():
            if not v.isdigit():
                raise ValueError(f'{where}: generic_param[{k!r}] = {v!r} is not a count')
        # A round trip through the message gives the same document (nothing was dropped).
        back = json_format.MessageToDict(msg, preserving_proto_field_name=True)
        if back != seg:
            raise ValueError(f'{where}: protobuf round trip differs: {back} != {seg}')
    return len(doc['segments'])


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    MetaDef = metadef_class()
    status = 0
    for path in argv:
        try:
            n = check(path, MetaDef)
            print(f'{path}: {n} segment(s) parse as vaip_core.MetaDefProto')
        except (ValueError, json_format.ParseError, OSError, json.JSONDecodeError) as e:
            print(f'FAIL {e}', file=sys.stderr)
            status = 1
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
