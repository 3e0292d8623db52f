// The playground served at GET / by the HTTP front end: one static page (no build step, no
// CDN; its source is playground.html) that runs two or more methods on the same prompt and seed
// through the stream of /v1/images/generations, showing each one's partial images as they come,
// then its image, its acceptance map (Stats.commit_map) and its figures, beside a live panel
// of the server (GET /v1/live).
#ifndef MULO_SERVER_HTTP_PLAYGROUND_PAGE_H_
#define MULO_SERVER_HTTP_PLAYGROUND_PAGE_H_

namespace mulo::server::http {

// The page's HTML, with its script and style inline.
const char* PlaygroundHtml();

}  // namespace mulo::server::http

#endif  // MULO_SERVER_HTTP_PLAYGROUND_PAGE_H_
