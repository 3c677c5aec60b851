// RequestError: why a request was refused, one type from the field that was
// wrong to the HTTP answer. The body's readers fill it (json_body.h's Fields,
// chat messages and tools, the endpoints' Parse* in completion_request.h)
// and the handler answers with it (ErrorAnswer). Internal to the API server.
#pragma once

#include <string>

#include "http/http_server.h"

namespace sightline::api {

// The HTTP status (400, or 404 for another model), the OpenAI error message
// and its `param`: the field at fault ("" if none), as a path:
// "stream_options.include_usage", "messages[0].content[1].type".
struct RequestError {
  int status = 400;
  std::string message;
  std::string param;
};

// Fills *error: `message`, at field `param`, with `status`. Returns false, so
// that a reader can `return Refuse(...)`.
bool Refuse(RequestError* error, std::string param, std::string message, int status = 400);

// The OpenAI error answer: `error.type` NotFoundError for 404, else
// BadRequestError.
HttpResponse ErrorAnswer(const RequestError& error);

}  // namespace sightline::api
