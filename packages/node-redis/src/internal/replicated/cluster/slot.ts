// The Cluster hash slot of a key (CRC16/XMODEM of the hash tag, or of the whole key, mod 16384),
// computed the way the server does, so a lock operation can be sent straight to the slot's master
// on a dedicated connection.

const table = new Uint16Array(256)
for (let i = 0; i < 256; i++) {
  let crc = i << 8
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1
  table[i] = crc & 0xffff
}

const crc16 = (bytes: Uint8Array): number => {
  let crc = 0
  for (const byte of bytes) crc = ((crc << 8) ^ table[((crc >> 8) ^ byte) & 0xff]!) & 0xffff
  return crc
}

const encoder = new TextEncoder()

/** The slot of `key`; only the part inside the first non-empty `{...}` counts, if there is one. */
export const slotOf = (key: string): number => {
  const bytes = encoder.encode(key)
  const open = bytes.indexOf(0x7b)
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1)
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % 16384
  }
  return crc16(bytes) % 16384
}
