/**
 * HTTP over rsockets, unchanged: node:http, node:https, node:http2 and undici servers and
 * clients whose connections are rsockets (the Node counterpart of rdma-core's librspreload, through the
 * connection hooks each of them has). See docs/http.md.
 *
 * ```ts
 * import http from 'node:http';
 * import { Agent, request } from 'undici';
 * import { createHttpServer, RAgent, rsConnector } from 'rdmacm/http';
 *
 * createHttpServer((req, res) => res.end('hello over RDMA\n')).listen(8080, '127.0.0.1', async () => {
 *   http.get('http://127.0.0.1:8080/', { agent: new RAgent({ keepAlive: true }) }, (res) => res.pipe(process.stdout));
 *   const { body } = await request('http://127.0.0.1:8080/', { dispatcher: new Agent({ connect: rsConnector }) });
 *   console.log(await body.text());
 * });
 * ```
 * @packageDocumentation
 */
import '../transport-settings.js';
export { serve, createHttpServer, createHttp2Server, type ServeListenOptions } from './server.js';
export {
  createHttpConnection,
  RAgent,
  RHttpsAgent,
  rsConnector,
  buildConnector,
  type HttpConnectionOptions,
  type RAgentOptions,
  type RHttpsAgentOptions,
  type UndiciConnectOptions,
  type UndiciConnectCallback,
  type UndiciConnector,
  type ConnectorOptions,
} from './client.js';
export { RSocket, RServer, type RSocketOptions } from '../rsocket/index.js';
