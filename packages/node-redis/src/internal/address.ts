// Node addresses as `host:port` text, the form node-redis uses to name cluster nodes.

export interface HostPort {
  readonly host: string
  readonly port: number
}

/** `host:port` to its parts; the last colon separates them, so IPv6 hosts survive. */
export const parse = (address: string): HostPort => {
  const at = address.lastIndexOf(":")
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) }
}

/** The `host:port` text of a node. */
export const format = (node: HostPort): string => `${node.host}:${node.port}`
