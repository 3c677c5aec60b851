#include "openai/request_error.h"

#include <utility>

namespace sightline::api {

bool Refuse(RequestError* error, std::string param, std::string message, int status) {
  error->status = status;
  error->param = std::move(param);
  error->message = std::move(message);
  return false;
}

HttpResponse ErrorAnswer(const RequestError& error) {
  return ErrorResponse(error.status, error.message,
                       error.status == 404 ? "NotFoundError" : "BadRequestError", error.param);
}

}  // namespace sightline::api
