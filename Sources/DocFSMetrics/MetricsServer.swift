import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// Where `-o metrics=ADDR:PORT` serves: a loopback address unless the user opts in to another
/// (`metrics_public`), since anyone who reaches the port reads the tree's figures.
package struct MetricsAddress: Equatable, Sendable {
    package var host: String
    package var port: Int

    /// `PORT`, `HOST:PORT` or `[IPV6]:PORT`; `localhost` is 127.0.0.1. A host that is not a
    /// loopback address literal (0.0.0.0, a LAN address, a name) is refused unless `public`.
    package static func parse(_ text: String, public allowed: Bool) throws(MetricsAddressError) -> MetricsAddress {
        var host = "127.0.0.1"
        var portText = text
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw .malformed(text)
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = String(text[text.index(close, offsetBy: 2)...])
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            portText = String(text[text.index(after: colon)...])
        }
        guard let port = Int(portText), (0...65535).contains(port) else { throw .malformed(text) }
        if host == "localhost" { host = "127.0.0.1" }
        if host.isEmpty { host = "0.0.0.0" }
        if !allowed, !isLoopback(host) { throw .notLoopback(text) }
        return MetricsAddress(host: host, port: port)
    }

    package static func isLoopback(_ host: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            return bytes == Array(repeating: 0, count: 15) + [1]
        }
        return false
    }
}

package enum MetricsAddressError: Error, CustomStringConvertible {
    case malformed(String)
    case notLoopback(String)
    package var description: String {
        switch self {
        case .malformed(let text): return "expected PORT, ADDRESS:PORT or [IPV6]:PORT, not '\(text)'"
        case .notLoopback(let text):
            return
                "\(text) is not a loopback address, and anyone who reaches it could read the metrics: add -o metrics_public (--metrics-public) to serve there anyway"
        }
    }
}

/// Serves `GET /metrics` (Prometheus text) with SwiftNIO on one thread of its own; every other
/// path is 404. A scrape reads the mount's figures on that thread, never on a FUSE thread.
package final class MetricsServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// Binds at once, so a port in use fails the mount before it starts.
    package init(address: MetricsAddress, metrics: MountMetrics) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(MetricsHandler(metrics: metrics))
                }
            }
        do {
            channel = try bootstrap.bind(host: address.host, port: address.port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw error
        }
        self.group = group
    }

    /// The port bound (the one asked for, or the kernel's choice for port 0).
    package var port: Int? { channel.localAddress?.port }

    package func stop() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

private final class MetricsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: MountMetrics
    private var head: HTTPRequestHead?

    init(metrics: MountMetrics) { self.metrics = metrics }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h): head = h
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(context, head)
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ request: HTTPRequestHead) {
        let path = request.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.uri
        let status: HTTPResponseStatus
        let body: [UInt8]
        var headers = HTTPHeaders()
        if path == "/metrics", request.method == .GET || request.method == .HEAD {
            status = .ok
            body = request.method == .HEAD ? [] : metrics.scrape()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
        } else {
            status = path == "/metrics" ? .methodNotAllowed : .notFound
            body = Array("docfs serves its metrics at /metrics\n".utf8)
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        }
        headers.add(name: "Content-Length", value: String(body.count))
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }
}
