# SPDX-License-Identifier: MIT
# Puts N fake live entries ("W 0000001 1 fake", one lease) in PREFIX/lock/k\0ID (run-probes.sh).
import base64, json, sys, urllib.request, os
ep, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def post(path, body):
    req = urllib.request.Request(ep + path, data=json.dumps(body).encode(), method='POST')
    return json.loads(urllib.request.urlopen(req).read())
lease = post('/v3/lease/grant', {'TTL': 900})['ID']
b = lambda x: base64.b64encode(x).decode()
done = 0
while done < n:
    ops = []
    for i in range(min(128, n - done)):
        key = (prefix + '/lock/k').encode() + b'\0' + ('%032x' % (0xfeed0000000000000000 + done + i)).encode()
        ops.append({'request_put': {'key': b(key), 'value': b(b'W 0000001 1 fake'), 'lease': lease}})
    post('/v3/kv/txn', {'success': ops})
    done += len(ops)
print('lease', lease)
