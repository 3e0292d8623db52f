// The playground served at GET / by the HTTP front end: one static page (no build step, no
// CDN) that generates through the stream of /v1/images/generations and shows the partial images
// as they come, then the image with its latency and the method's statistics.
#ifndef MULO_SERVER_HTTP_PLAYGROUND_PAGE_H_
#define MULO_SERVER_HTTP_PLAYGROUND_PAGE_H_

namespace mulo::server::http {

// The page's HTML, with its script and style inline.
const char* PlaygroundHtml();

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_PLAYGROUND_PAGE_H_
