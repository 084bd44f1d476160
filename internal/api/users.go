package api

import "time"

// UsersPath is the socket API's route of the console's people: GET lists
// them, POST adds one (AddUserRequest); UsersPath/NAME is DELETEd to
// remove one, UsersPath/NAME/token POSTed to mint a token for one.
const UsersPath = "/v1/web/users"

// AddUserRequest is the body of POST UsersPath.
type AddUserRequest struct {
	Name string `json:"name"`
	// ReadOnly: the user sees everything and changes nothing.
	ReadOnly bool `json:"read_only"`
}

// User is one person of the console, as `herd web user list -o json`
// shows it.
type User struct {
	Name      string    `json:"name"`
	ReadOnly  bool      `json:"read_only"`
	CreatedAt time.Time `json:"created_at"`
}

// UserToken is the reply of POST UsersPath/NAME/token: a bearer token for
// the user, shown this once (the store keeps only its hash).
type UserToken struct {
	User     string `json:"user"`
	ReadOnly bool   `json:"read_only"`
	Token    string `json:"token"`
}
