/**
 * Pure Redis Cluster helpers: the key-to-slot function (CRC16/XMODEM of the hash tag, mod 16384)
 * and parsers for `CLUSTER SLOTS` and `CLUSTER NODES` replies.
 */

/** The number of hash slots in a Redis Cluster. */
export const slotCount = 16384

const crcTable: ReadonlyArray<number> = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  return crc
})

/** CRC16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster uses it. */
export const crc16 = (bytes: Uint8Array): number => {
  let crc = 0
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ (crcTable[((crc >> 8) ^ byte) & 0xff] ?? 0)
  return crc
}

/**
 * The hash slot of a key: only the part between the first `{` and the next `}` counts when that
 * part is non-empty (the hash tag), as in `CLUSTER KEYSLOT`.
 */
export const keySlot = (key: string): number => {
  const bytes = Buffer.from(key, "utf8")
  const open = bytes.indexOf(0x7b)
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1)
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % slotCount
  }
  return crc16(bytes) % slotCount
}

/** One node entry of a `CLUSTER SLOTS` range. */
export interface SlotNode {
  readonly host: string
  readonly port: number
  readonly id: string
}

/** One `CLUSTER SLOTS` range: its master first, then its replicas. */
export interface SlotRange {
  readonly start: number
  readonly end: number
  readonly master: SlotNode
  readonly replicas: ReadonlyArray<SlotNode>
}

const parseSlotNode = (entry: unknown): SlotNode | undefined =>
  Array.isArray(entry) && entry.length >= 3
    ? { host: String(entry[0]), port: Number(entry[1]), id: String(entry[2]) }
    : undefined

/** Parses a RESP2 `CLUSTER SLOTS` reply; malformed entries are skipped. */
export const parseSlots = (reply: unknown): Array<SlotRange> => {
  if (!Array.isArray(reply)) return []
  const ranges: Array<SlotRange> = []
  for (const entry of reply) {
    if (!Array.isArray(entry) || entry.length < 3) continue
    const nodes = entry.slice(2).flatMap((node: unknown) => {
      const parsed = parseSlotNode(node)
      return parsed === undefined ? [] : [parsed]
    })
    const [master, ...replicas] = nodes
    if (master !== undefined) ranges.push({ start: Number(entry[0]), end: Number(entry[1]), master, replicas })
  }
  return ranges
}

/** One line of `CLUSTER NODES`. */
export interface NodeLine {
  readonly id: string
  readonly port: number
  readonly flags: ReadonlyArray<string>
  /** The master's id for a replica, "-" for a master. */
  readonly masterId: string
  readonly linkState: string
  /** Slot entries as printed: "0-5460", "42", or migration markers like "[42->-id]". */
  readonly slots: ReadonlyArray<string>
}

/** Parses `CLUSTER NODES` text. */
export const parseNodes = (text: string): Array<NodeLine> =>
  text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .map((line) => {
      const [id = "", address = "", flags = "", masterId = "", , , , linkState = "", ...slots] = line.split(" ")
      const port = Number(/:(\d+)@/.exec(address)?.[1] ?? -1)
      return { id, port, flags: flags.split(","), masterId, linkState, slots }
    })

/** A key `<prefix><n>` whose slot lies in [first, last] (the smallest such n). */
export const keyInSlots = (prefix: string, first: number, last: number): string => {
  for (let n = 0; ; n++) {
    const key = `${prefix}${n}`
    const slot = keySlot(key)
    if (slot >= first && slot <= last) return key
  }
}
